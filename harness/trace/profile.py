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

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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
    think_s: Dist  # tool execution / user time before each later turn
    max_context_tokens: int = Field(ge=1)  # a session ends before its prompt would exceed this
    subagents: Subagents

    def knobs(self) -> dict:
        return self.model_dump(mode="json")


def set_path(doc: dict, dotted: str, value: Any) -> None:
    node = doc
    keys = dotted.split(".")
    for key in keys[:-1]:
        nxt = node.setdefault(key, {})
        if not isinstance(nxt, dict):
            raise ProfileError(f"cannot set '{dotted}': '{key}' is not a mapping", field=dotted)
        node = nxt
    node[keys[-1]] = value


def parse_set(item: str) -> tuple[str, Any]:
    """'subagents.mode=spawn' -> ('subagents.mode', 'spawn'); the value is read as YAML."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ProfileError(f"--set expects key=value, got {item!r}")
    try:
        return key.strip(), yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ProfileError(f"--set {key}: value is not valid YAML") from None


def validate_profile(doc: Any, *, source: str = "<profile>") -> Profile:
    if not isinstance(doc, dict):
        raise ProfileError("a profile must be a YAML mapping", path=source)
    try:
        return Profile.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ProfileError(msg, path=source, field=field) from None


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"cannot read profile: {exc.strerror}", path=path) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ProfileError(f"invalid YAML: {getattr(exc, 'problem', exc)}", path=path, line=line) from None


def load_profile(
    path: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    sets: Iterable[str] = (),
) -> Profile:
    """Read a profile (default `workloads/agentx.yaml`), apply dotted overrides, validate."""
    path = Path(path) if path is not None else DEFAULT_PROFILE
    doc = copy.deepcopy(_read_yaml(path))
    if isinstance(doc, dict):
        for key, value in (overrides or {}).items():
            set_path(doc, key, value)
        for item in sets:
            set_path(doc, *parse_set(item))
    return validate_profile(doc, source=str(path))
