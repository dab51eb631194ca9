"""Workload profiles: the YAML files under `workloads/` that the generator draws sessions from.

A profile is validated once at the edge into a frozen `Profile`; an unknown key or a bad value is
a `ProfileError` naming the file and the dotted key. `--set a.b=value` overrides any field (the
value is read as YAML). Token counts are in unscaled units; `scale` shrinks them all at the end.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import yamlconf
from harness.errors import ProfileError

WORKLOADS_DIR = Path(__file__).resolve().parents[2] / "workloads"
DEFAULT_PROFILE = WORKLOADS_DIR / "agentx.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dist(_Strict):
    """Lognormal with the given median and log-space sigma (0 = constant), clipped to [min, max]."""

    median: float = Field(ge=0)
    sigma: float = Field(default=0.0, ge=0, le=5)
    min: float = Field(default=0.0, ge=0)
    max: float | None = None

    @model_validator(mode="after")
    def _bounds(self) -> Dist:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


class Arrival(_Strict):
    process: Literal["poisson", "constant", "all_at_once"] = "poisson"
    rate_per_s: float = Field(default=1.0, gt=0)  # sessions per second (poisson, constant)


class SystemPrompts(_Strict):
    count: int = Field(ge=1)  # distinct system prompts (+ tool schemas) shared across sessions
    tokens: Dist


class SubagentCount(_Strict):
    mean: float = Field(ge=1)  # mean subagents per main session that has any (1 + Poisson)
    max: int = Field(ge=1)


class HumanPause(_Strict):
    """A main session's gap is, with `probability`, a person's pause instead of tool execution."""

    probability: float = Field(default=0.0, ge=0, le=1)
    duration: Dist = Dist(median=0.0)


class Subagents(_Strict):
    probability: float = Field(ge=0, le=1)  # share of main sessions that start any
    count: SubagentCount
    mode: Literal["fork", "spawn", "mix"] = "fork"
    fork_fraction: float = Field(default=0.5, ge=0, le=1)  # share of forks when mode is mix
    parallelism: int = Field(default=4, ge=1)  # most subagents started after one turn
    turns: Dist
    first_input_tokens: Dist  # the task the parent hands over
    new_input_tokens: Dist
    output_tokens: Dist  # the last turn's output is the report the parent's next turn joins
    think_s: Dist


class Profile(_Strict):
    name: str
    description: str = ""
    sessions: int = Field(ge=1)
    scale: float = Field(default=1.0, gt=0)
    arrival: Arrival = Arrival()
    system_prompts: SystemPrompts
    turns: Dist  # turns per main session
    first_input_tokens: Dist  # the user's task message
    new_input_tokens: Dist  # context growth per later turn: tool results, user replies
    output_tokens: Dist
    think_s: Dist  # tool execution before each later turn
    human_pause: HumanPause = HumanPause()  # main sessions: some gaps are a person's break instead
    max_context_tokens: int = Field(ge=1)  # a session ends before its prompt would exceed this
    subagents: Subagents
    # What the content is (docs/traces.md, "Content"): common English words, or the Python
    # standard library's source. Words by default: a profile written before these fields
    # existed keeps generating byte-identical traces (same trace_sha256, comparable runs).
    content: Literal["words", "code"] = "words"
    # plain: user / assistant text turns; tools: each turn's output is a tool call whose result
    # is the next turn's input (chat sends `tools`, `tool_calls`, role `tool`)
    turn_form: Literal["plain", "tools"] = "plain"

    def knobs(self) -> dict:
        """The profile as the trace header records it; the content fields only when they are not
        their defaults, so that traces of older profiles keep their bytes."""
        out = self.model_dump(mode="json")
        for key, default in CONTENT_DEFAULTS.items():
            if out[key] == default:
                del out[key]
        return out


CONTENT_DEFAULTS = {"content": "words", "turn_form": "plain"}


def content_form(meta: Mapping[str, Any]) -> tuple[str, str]:
    """(content, turn_form) a trace header's meta asks for; imported traces: the defaults."""
    knobs = meta.get("knobs")
    knobs = knobs if isinstance(knobs, Mapping) else {}
    content = knobs.get("content", CONTENT_DEFAULTS["content"])
    form = knobs.get("turn_form", CONTENT_DEFAULTS["turn_form"])
    return str(content), str(form)


def set_path(doc: dict, dotted: str, value: Any) -> None:
    yamlconf.set_path(doc, dotted, value, ProfileError)


def parse_set(item: str) -> tuple[str, Any]:
    """'subagents.mode=spawn' -> ('subagents.mode', 'spawn'); the value is read as YAML."""
    return yamlconf.parse_set(item, ProfileError)


def validate_profile(
    doc: Any, *, source: str = "<profile>", root=None, overrides: tuple[str, ...] = ()
) -> Profile:
    return yamlconf.validate_model(
        Profile, doc, ProfileError, source=source, root=root, what="profile", overrides=overrides
    )


def load_profile(
    path: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    sets: Iterable[str] = (),
) -> Profile:
    """Read a profile (default `workloads/agentx.yaml`), apply dotted overrides, validate."""
    path = Path(path) if path is not None else DEFAULT_PROFILE
    doc, root = yamlconf.read_yaml(path, ProfileError, "profile")
    doc, keys = copy.deepcopy(doc), list((overrides or {}).keys())
    if isinstance(doc, dict):
        for key, value in (overrides or {}).items():
            set_path(doc, key, value)
        for item in sets:
            key, value = parse_set(item)
            set_path(doc, key, value)
            keys.append(key)
    return validate_profile(doc, source=str(path), root=root, overrides=tuple(keys))
