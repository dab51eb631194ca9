"""Scenario files: YAML -> a validated, frozen config (unknown keys and wrong types are errors).

A scenario names the workload, the target, the load, SLOs, GPU count, an optional sweep and the
execution backend. It is the one model of a run: `harness replay` flags are overrides onto it,
and its defaults are the defaults of both verbs (docs/driver.md, "Defaults"). It is validated once, when loaded; errors name the file, the line and the
dotted field. `--set key=value` overrides are applied to the raw document before validation, so
they are checked like the file itself.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import yamlconf
from harness.errors import ScenarioError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Workload(_Strict):
    profile: str | None = None  # a profile file (workloads/*.yaml); relative to the scenario
    trace: str | None = None  # or a trace file in any supported format
    trace_format: Literal["auto", "native", "mooncake", "weka"] = "auto"
    group_sessions: bool = False  # Mooncake: join requests whose hash ids extend an earlier one
    mooncake_block_size: int | None = Field(default=None, gt=0)  # Mooncake: tokens per hash id
    overrides: dict[str, Any] = Field(default_factory=dict)  # profile fields (dotted keys)
    sessions: int | None = Field(default=None, gt=0)
    scale: float | None = Field(default=None, gt=0)
    seed: int = 1  # the generated trace's, and the open-loop arrival draws'
    salt: str | None = None  # "auto": a fresh salt per run, so repeated runs share no cache
    tokenizer: str | None = (
        None  # a Hugging Face tokenizer folder or tokenizer.json (docs/metrics.md)
    )

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if (self.profile is None) == (self.trace is None):
            raise ValueError("give exactly one of 'profile' or 'trace'")
        return self


class Endpoint(_Strict):
    url: str
    name: str | None = None


class EngineTarget(_Strict):
    mode: Literal["inprocess", "http"] = "inprocess"
    replicas: int = Field(default=1, ge=1, le=16)
    options: dict[str, Any] = Field(default_factory=dict)  # EngineConfig fields (vLLM names)


class Timeouts(_Strict):
    connect_s: float = Field(default=30.0, gt=0)  # to open a connection
    ttft_s: float = Field(default=600.0, gt=0)  # from send to the first output token
    idle_s: float = Field(default=120.0, gt=0)  # between reads once output started
    total_s: float = Field(default=600.0, gt=0)  # for a whole request


class Target(_Strict):
    kind: Literal["engine", "endpoints"] = "engine"
    engine: EngineTarget = EngineTarget()
    endpoints: tuple[Endpoint, ...] = ()
    model: str | None = None  # default: the engine's served name / the endpoint's first model
    api: Literal["chat", "completions"] = "completions"
    prompt_format: Literal["tokens", "text"] = "tokens"
    api_key_env: str | None = None  # the NAME of an environment variable, never the key
    api_key_file: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    routing: Literal["round_robin", "least_outstanding", "session_sticky"] = "session_sticky"
    follow_parent: bool = True  # subagents route and tag as their root session
    send_min_tokens: bool = True
    send_ignore_eos: bool = True
    continuous_usage: bool = False  # vLLM stream_options.continuous_usage_stats
    session_id_field: str | None = None  # also send the session id in the body under this name
    scrape_metrics: bool = True  # read the server's Prometheus /metrics before and after
    timeouts: Timeouts = Timeouts()
    max_connections: int | None = Field(default=None, ge=1)  # default: sized to the load
    block_size: int | None = Field(default=None, gt=0)  # the server's KV block (manifest), the
    # ideal's fallback granularity; default: the engine's block_size option, else 16

    @model_validator(mode="after")
    def _endpoints_given(self) -> Target:
        if self.kind == "endpoints" and not self.endpoints:
            raise ValueError("kind 'endpoints' needs at least one entry in 'endpoints'")
        if self.kind == "engine" and self.endpoints:
            raise ValueError("'endpoints' is only for kind 'endpoints'")
        return self


class Retry(_Strict):
    """harness.driver.retry.RetryPolicy: which failures are sent again, how often, how late."""

    attempts: int = Field(default=1, ge=1)
    backoff_s: float = Field(default=0.5, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    max_backoff_s: float = Field(default=30.0, ge=0)
    jitter: float = Field(default=0.2, ge=0, lt=1)
    retry_on: tuple[str, ...] | None = None  # default: harness.driver.retry.RETRY_ON


class Load(_Strict):
    mode: Literal["closed", "open", "timestamps"] = "closed"
    concurrency: int = Field(default=4, ge=1)  # closed loop: sessions in flight
    session_rate: float | None = Field(default=None, gt=0)  # open loop: sessions per second
    arrival: Literal["poisson", "constant"] = "poisson"
    time_scale: float = Field(default=1.0, gt=0)  # timestamps mode
    think_cap_s: float | None = Field(default=None, gt=0)  # longer think times wait only this long
    max_sessions: int | None = Field(default=None, ge=1)
    max_requests: int | None = Field(default=None, ge=1)
    max_duration_s: float | None = Field(default=None, gt=0)
    drain_s: float = Field(default=60.0, ge=0)  # after max_duration_s, cancel what is in flight
    warmup_s: float = Field(default=0.0, ge=0)
    warmup_requests: int = Field(default=0, ge=0)
    cooldown_s: float = Field(default=0.0, ge=0)
    history: Literal["recorded", "live"] = "recorded"
    cycle_trace: bool = (
        True  # closed loop with max_duration_s: draw the trace again when it runs out
    )
    mid_trajectory: bool = (
        False  # closed loop: the first `concurrency` tasks start at a random turn
    )
    window: Literal["phases", "steady"] = (
        "phases"  # the analyzer's measured window (docs/metrics.md)
    )
    retry: Retry = Field(
        default_factory=lambda: Retry()
    )  # agent-like retries; off (1 attempt) by default

    @model_validator(mode="after")
    def _rate_for_open(self) -> Load:
        if self.mode == "open" and self.session_rate is None:
            raise ValueError("open-loop load needs 'session_rate'")
        return self


class SweepAxis(_Strict):
    param: str  # dotted scenario field, e.g. load.concurrency or target.engine.options.max_num_seqs
    values: tuple[Any, ...] = Field(min_length=1)


class Execution(_Strict):
    backend: Literal["local", "ray"] = "local"
    workers: int = Field(default=1, ge=1)
    address: str = "auto"


class Scenario(_Strict):
    name: str
    description: str = ""
    workload: Workload
    target: Target = Target()
    load: Load = Load()
    slos: dict[str, float | str] = Field(default_factory=dict)  # e.g. ttft_p90: 2s, tpot: 50ms
    gpus: int = Field(default=1, ge=1)
    sweep: tuple[SweepAxis, ...] = Field(default=(), max_length=2)
    execution: Execution = Execution()
    results_dir: str = "results"
    run_id: str | None = None  # default: the run folder's name

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")

    def points(self) -> list[tuple[str, Scenario]]:
        """The sweep's points as (label, scenario without sweep); one point when no sweep."""
        if not self.sweep:
            return [("", self)]
        base = self.to_dict()
        base["sweep"] = []
        out = []
        for combo in itertools.product(*(axis.values for axis in self.sweep)):
            doc = copy.deepcopy(base)
            labels = []
            for axis, value in zip(self.sweep, combo, strict=True):
                set_path(doc, axis.param, value)
                labels.append(f"{axis.param.rsplit('.', 1)[-1]}={value}")
            out.append(("-".join(labels), validate(doc, source="<sweep point>")))
        return out


def default_of(dotted: str) -> Any:
    """The default of a scenario field, e.g. default_of("load.concurrency") == 4."""
    model: Any = Scenario
    value: Any = None
    for key in dotted.split("."):
        fields = type(model).model_fields if isinstance(model, BaseModel) else model.model_fields
        info = fields[key]
        value = info.get_default(call_default_factory=True)
        model = value if isinstance(value, BaseModel) else info.annotation
    return value


def default_text(dotted: str) -> str:
    """A field's default as the docs and `--help` show it: unset, none, true/false, 600, chat."""
    value = default_of(dotted)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple | list | dict) and not value:
        return "none"
    return str(value)


# ---- loading -------------------------------------------------------------------------------


def parse_set(item: str) -> tuple[str, Any]:
    return yamlconf.parse_set(item, ScenarioError)


def set_path(doc: dict, dotted: str, value: Any) -> None:
    yamlconf.set_path(doc, dotted, value, ScenarioError)


def validate(
    doc: Any,
    *,
    source: str = "<scenario>",
    root: yaml.Node | None = None,
    overrides: tuple[str, ...] = (),
) -> Scenario:
    scenario = yamlconf.validate_model(
        Scenario, doc, ScenarioError, source=source, root=root, what="scenario", overrides=overrides
    )
    _check_parts(scenario, source, root)
    return scenario


def _check_parts(scenario: Scenario, source: str, root: yaml.Node | None) -> None:
    """Fields checked by the parts that own them: engine options and SLOs."""
    from harness.analysis.slo import parse_slos
    from harness.engine.config import EngineConfig
    from harness.errors import HarnessError

    checks = [(("slos",), lambda: parse_slos(scenario.slos, source="slos"))]
    if scenario.target.kind == "engine":
        options = dict(scenario.target.engine.options)
        checks.append((("target", "engine", "options"), lambda: EngineConfig.from_dict(options)))
    for loc, check in checks:
        try:
            check()
        except HarnessError as exc:
            raise ScenarioError(
                str(exc), path=source, line=yamlconf.line_of(root, loc), field=".".join(loc)
            ) from None


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    path = Path(path)
    doc, root = yamlconf.read_yaml(path, ScenarioError, "scenario")
    keys = []
    if isinstance(doc, dict):
        doc = resolve_paths(doc, path.parent)
        for item in overrides:
            key, value = parse_set(item)
            set_path(doc, key, value)
            keys.append(key)
    return validate(doc, source=str(path), root=root, overrides=tuple(keys))


def resolve_paths(doc: dict, base: Path) -> dict:
    """Workload files resolve next to the scenario, then one folder up (the repo), then the cwd."""
    doc = copy.deepcopy(doc)
    workload = doc.get("workload")
    if isinstance(workload, dict):
        for key in ("profile", "trace", "tokenizer"):
            value = workload.get(key)
            if isinstance(value, str) and not Path(value).is_absolute():
                for candidate in (base / value, base.parent / value, Path.cwd() / value):
                    if candidate.exists():
                        workload[key] = str(candidate.resolve())
                        break
    return doc


def dump_scenario(scenario: Scenario, path: str | Path) -> None:
    """The resolved scenario, loadable again with `load_scenario`; header values (they may be
    credentials) are replaced by "<redacted>", endpoints lose user info and query."""
    from harness.driver.manifest import redact_url

    doc = scenario.to_dict()
    target = doc["target"]
    target["headers"] = dict.fromkeys(target["headers"], "<redacted>")
    for endpoint in target["endpoints"]:
        endpoint["url"] = redact_url(endpoint["url"])
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
