"""The replay's settings: `Load` is the scenario's `load:`, `ReplayConfig` all a replay needs.

Each setting is declared once, here (its default, bounds and description): the scenario composes
these models, `harness replay`'s flags set their fields (harness/app/flags.py) and docs/driver.md's
"Defaults" table shows them. A YAML key that differs from the code's name is the field's alias
(`mode`, `max_duration_s`); the manifest's "replay" section keeps the code's names.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from harness.driver.apis import APIS, api_named
from harness.driver.retry import RetryPolicy
from harness.yamlconf import Strict


class Load(Strict):
    """When to send: the load mode, its bounds and the measured phases. Times in seconds on the
    run clock (0 = run start)."""

    load: Literal["closed", "open", "timestamps"] = Field(
        "closed",
        alias="mode",
        description="closed: `concurrency` main sessions in flight; open: arrivals at "
        "`session_rate`; timestamps: the trace's arrival times",
    )
    concurrency: int = Field(
        4, ge=1, description="closed loop: N main sessions in flight, a new one when one ends"
    )
    session_rate: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        validate_default=True,  # so that open loop without a rate is caught
        description="open loop: R main sessions per second",
    )
    arrival: Literal["poisson", "constant"] = Field(
        "poisson", description="open-loop arrival process"
    )
    time_scale: float = Field(
        1.0, gt=0, description="timestamps: multiply arrival times by X (0.5 = twice as fast)"
    )
    think_cap_s: float | None = Field(
        None,
        gt=0,
        description="wait at most S seconds for a think time (human breaks run to hours); "
        "the manifest and the report say how many pauses were shortened",
    )
    max_sessions: int | None = Field(
        None, ge=1, description="start at most N main sessions (subagents come with them)"
    )
    max_requests: int | None = Field(None, ge=1, description="send at most N requests")
    max_duration: float | None = Field(
        None,
        gt=0,
        alias="max_duration_s",
        description="stop sending after S seconds; requests in flight may finish within drain_s",
    )
    drain_s: float = Field(
        60.0, ge=0, description="after max_duration_s, cancel requests still in flight after S s"
    )
    warmup_s: float = Field(
        0.0, ge=0, description="mark requests sent in the first S seconds phase=warmup"
    )
    warmup_requests: int = Field(0, ge=0, description="mark the first N requests sent phase=warmup")
    cooldown_s: float = Field(
        0.0,
        ge=0,
        description="mark requests sent in the last S seconds of max_duration_s phase=cooldown",
    )
    history: Literal["recorded", "live"] = Field(
        "recorded",
        description="history from the trace's recorded outputs (exact prefix reuse) or each "
        "reply's actual text",
    )
    cycle_trace: bool = Field(
        True, description="closed loop with max_duration_s: draw the trace again when it runs out"
    )
    mid_trajectory: bool = Field(
        False,
        description="closed loop: start the first N tasks at random turns, their history sent "
        "as warm-up",
    )
    window: Literal["phases", "steady"] = Field(
        "phases",
        description="the analyzer's measured window: the phases, or from when load and hit rate "
        "hold (docs/metrics.md)",
    )
    retry: RetryPolicy = Field(
        default_factory=RetryPolicy, description="agent-like retries; off (1 attempt) by default"
    )

    @field_validator("session_rate")
    @classmethod
    def _open_needs_a_rate(cls, rate: float | None, info: ValidationInfo) -> float | None:
        if info.data.get("load") == "open" and rate is None:
            raise ValueError("open loop needs a session rate")
        return rate

    @field_validator("cooldown_s")
    @classmethod
    def _cooldown_needs_an_end(cls, cooldown: float, info: ValidationInfo) -> float:
        end = info.data.get("max_duration")
        if cooldown and end is None:
            raise ValueError("a cool-down needs max_duration_s (the end it counts back from)")
        return cooldown

    @model_validator(mode="after")
    def _something_measured(self) -> Load:
        end, warmup, cooldown = self.max_duration, self.warmup_s, self.cooldown_s
        if end is not None and (warmup or cooldown) and warmup + cooldown >= end:
            raise ValueError(
                f"warm-up {warmup:g} s + cool-down {cooldown:g} s cover the whole run "
                f"(max_duration_s {end:g}): nothing would be measured"
            )
        return self

    def phase(self, t_sent: float, index: int) -> str:
        """Phase of the `index`-th request (0-based, in send order) sent at `t_sent`."""
        if index < self.warmup_requests or t_sent < self.warmup_s:
            return "warmup"
        if (
            self.cooldown_s
            and self.max_duration is not None
            and t_sent >= self.max_duration - self.cooldown_s
        ):
            return "cooldown"
        return "measure"


class Sending(Strict):
    """How each request is sent and routed: settings of the scenario's `target:`."""

    api: str = Field(
        "completions",
        description="the API requests are sent in: an entry of the HTTP target's registry "
        '(harness/driver/apis/; docs/driver.md, "APIs"): chat, completions (token ids or '
        "text), messages (Anthropic's), responses (OpenAI's)...",
    )
    prompt_format: Literal["tokens", "text"] = Field(
        "tokens", description="completions API: token-id prompts or text prompts"
    )
    routing: Literal["round_robin", "least_outstanding", "session_sticky", "longest_prefix"] = (
        Field(
            "session_sticky",
            description="how requests are spread over several endpoints (longest_prefix: where the "
            "router sent the longest leading part of the prompt before)",
        )
    )
    follow_parent: bool = Field(
        True, description="route and tag subagents by their root session's id, not their own"
    )
    session_headers: tuple[Literal["x-session-id", "correlation", "dynamo", "smg"], ...] = Field(
        ("x-session-id",),
        description="routers' session header families: x-session-id (X-Session-ID), "
        "correlation (X-Correlation-ID), dynamo (X-Dynamo-Session-ID and parent), smg "
        "(X-SMG-Routing-Key); subagents also name their parent and root",
    )
    cache_control: bool = Field(
        False,
        description="messages API: cache_control breakpoints where Claude Code places them "
        "(the system prompt, the last two turns)",
    )
    anthropic_version: str = Field(
        "2023-06-01", description="messages API: the anthropic-version header"
    )
    previous_response_id: bool = Field(
        False,
        description="responses API: the server keeps the history; each turn sends only its "
        "new items with the previous response's id",
    )

    @field_validator("session_headers", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """`--session-headers dynamo,smg` (a flag's value is one string)."""
        return (
            tuple(v.strip() for v in value.split(",") if v.strip())
            if isinstance(value, str)
            else value
        )

    @field_validator("api")
    @classmethod
    def _a_registered_api(cls, api: str) -> str:
        api_named(api)
        return api

    @model_validator(mode="after")
    def _options_of_their_api(self) -> Sending:
        """An API's own switch turned on with another API is refused (it would do nothing)."""
        for entry in APIS.values():
            for name in entry.options if entry.name != self.api else ():
                if getattr(self, name) is True:
                    raise ValueError(f"{name} is an option of api {entry.name!r}, not {self.api!r}")
        return self


class ReplayConfig(Load, Sending):
    """The load and sending settings as the scenario gave them, plus values harness/app/build.py
    resolves from the rest of the scenario."""

    block_size: int = Field(16, gt=0, description="the server's KV block: the manifest's")
    salt: str | None = Field(None, description="the salt segment before every prompt")
    tokenizer: str | None = Field(None, description="a tokenizer the text is exact for")
    seed: int = Field(1, description="open-loop arrival draws, mid-trajectory start turns")
    run_id: str = "run"

    @classmethod
    def of(cls, load: Load, sending: Sending, **resolved: Any) -> ReplayConfig:
        """`load` and `sending` as validated (by the scenario), with the resolved values."""
        # Not validated again: every value was checked by the model it comes from.
        parts = {name: getattr(load, name) for name in Load.model_fields}
        parts |= {name: getattr(sending, name) for name in Sending.model_fields}
        return cls.model_construct(**parts, **resolved)

    def as_dict(self) -> dict:
        """The manifest's "replay" section: the code's names, which the analyzer reads, and
        how a server counts the API's prompts (its registry entry's `prompt_space`)."""
        return self.model_dump() | api_named(self.api).prompt_space(self)
