"""The replay configuration: one frozen, validated object for `harness replay` and `harness run`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.driver.retry import RetryPolicy
from harness.driver.routing import POLICIES
from harness.errors import InputError

LOADS = ("closed", "open", "timestamps")
ARRIVALS = ("poisson", "constant")
HISTORIES = ("recorded", "live")
APIS = ("chat", "completions")
PROMPT_FORMATS = ("tokens", "text")
WINDOWS = ("phases", "steady")


@dataclass(frozen=True)
class ReplayConfig:
    """When and what to send. Times in seconds on the run clock (0 = run start)."""

    load: str = (
        "closed"  # closed: `concurrency` sessions in flight; open: arrivals at `session_rate`
    )
    concurrency: int = 4
    session_rate: float | None = None  # main sessions per second (open loop)
    arrival: str = "poisson"
    time_scale: float = 1.0  # timestamps: intended arrival = (arrival_s - first) * time_scale
    think_cap_s: float | None = (
        None  # a longer think time waits only this long (manifest: think_capped)
    )
    max_sessions: int | None = None  # main sessions started (subagents come with them)
    max_requests: int | None = None
    max_duration: float | None = None  # stop sending at this time; in-flight requests drain
    drain_s: float = 60.0  # after max_duration, cancel what is still in flight after this long
    warmup_s: float = 0.0  # requests sent before this are phase "warmup"
    warmup_requests: int = 0  # ... and so are the first N requests sent
    cooldown_s: float = 0.0  # requests sent in the last S seconds of max_duration are "cooldown"
    history: str = "recorded"
    api: str = "completions"
    prompt_format: str = "tokens"  # completions API: token-id or text prompts
    routing: str = "session_sticky"
    follow_parent: bool = True  # subagents use their root session's sticky key
    block_size: int = 16  # the server's KV block, as configured: the manifest's block_size
    salt: str | None = None
    tokenizer: str | None = (
        None  # a Hugging Face tokenizer folder or tokenizer.json: text exact for it
    )
    seed: int = 1  # open-loop arrival draws, mid-trajectory start turns
    cycle_trace: bool = True  # closed loop with max_duration: draw the trace again when it runs out
    mid_trajectory: bool = (
        False  # closed loop: the first `concurrency` tasks start at a random turn
    )
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # off (1 attempt) unless configured
    window: str = "phases"  # the analyzer's measured window: "phases" or "steady" (analysis.window)
    run_id: str = "run"

    def __post_init__(self) -> None:
        self._check_choice("load", LOADS)
        self._check_choice("arrival", ARRIVALS)
        self._check_choice("history", HISTORIES)
        self._check_choice("api", APIS)
        self._check_choice("prompt_format", PROMPT_FORMATS)
        self._check_choice("routing", POLICIES)
        self._check_choice("window", WINDOWS)
        if self.concurrency < 1:
            raise InputError(f"must be >= 1, got {self.concurrency}", field="concurrency")
        if self.load == "open" and not (
            self.session_rate and self.session_rate > 0 and math.isfinite(self.session_rate)
        ):
            raise InputError("open loop needs a positive finite session rate", field="session_rate")
        for name in ("max_sessions", "max_requests"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise InputError(f"must be >= 1, got {v}", field=name)
        for name in ("time_scale", "max_duration", "block_size", "think_cap_s"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise InputError(f"must be positive, got {v}", field=name)
        for name in ("drain_s", "warmup_s", "cooldown_s", "warmup_requests"):
            if getattr(self, name) < 0:
                raise InputError(f"must be >= 0, got {getattr(self, name)}", field=name)
        if self.tokenizer is not None and not Path(self.tokenizer).exists():
            raise InputError(f"no such file or folder: {self.tokenizer}", field="tokenizer")
        if self.cooldown_s and self.max_duration is None:
            raise InputError(
                "a cool-down needs max_duration (the end it counts back from)", field="cooldown_s"
            )

    def _check_choice(self, name: str, choices: tuple[str, ...]) -> None:
        if getattr(self, name) not in choices:
            raise InputError(
                f"must be one of {', '.join(choices)}, got {getattr(self, name)!r}", field=name
            )

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

    def as_dict(self) -> dict:
        return asdict(self)
