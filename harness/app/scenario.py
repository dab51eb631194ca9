"""Scenario files: YAML -> a validated, frozen config (unknown keys and wrong types are errors).

A scenario names the workload, the target, the load, SLOs, GPU count, an optional sweep and the
execution backend. It is the one model of a run: `harness replay` flags are overrides onto it,
and its defaults are the defaults of both verbs (docs/driver.md, "Defaults"). Its `load:`, its
target's sending and HTTP settings (`target.timeouts` among them) are the driver's own models
(harness/driver/config.py, harness/driver/http/config.py), not copies. It is validated once, when
loaded; errors name the file, the line and the dotted field. `--set key=value` overrides are
applied to the raw document before validation, so they are checked like the file itself.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator, model_validator
from pydantic.fields import FieldInfo

from harness import yamlconf
from harness.driver.config import Load, Sending
from harness.driver.endpoint import parse_endpoint
from harness.driver.http import HTTPSettings
from harness.errors import InputError, ScenarioError
from harness.yamlconf import Strict


class Workload(Strict):
    profile: str | None = Field(None, description="a profile file (workloads/*.yaml)")
    trace: str | None = Field(None, description="or a trace file in any supported format")
    trace_format: Literal["auto", "native", "mooncake", "weka"] = Field(
        "auto", description="trace format (auto: detect)"
    )
    group_sessions: bool = Field(
        False,
        description="Mooncake trace: join requests whose hash ids extend an earlier request "
        "into sessions",
    )
    mooncake_block_size: int | None = Field(
        None, gt=0, description="Mooncake trace: tokens per hash block (unset: 512)"
    )
    overrides: dict[str, Any] = Field(default_factory=dict)  # profile fields (dotted keys)
    sessions: int | None = Field(default=None, gt=0)
    scale: float | None = Field(default=None, gt=0)
    seed: int = Field(
        1, description="seed of the generated trace and of the open-loop arrival draws"
    )
    salt: str | None = Field(
        None,
        description="prefix every prompt with a salt segment so repeated runs do not hit each "
        "other's cache ('auto': a fresh one per run)",
    )
    tokenizer: str | None = Field(
        None,
        description="a Hugging Face tokenizer folder or its tokenizer.json (needs 'tokenizers'): "
        "text prompts and chat messages get exactly the trace's token counts for it; with the "
        "folder's chat template the analyzer counts chat prompts in the server's tokens",
    )

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_exists(cls, path: str | None) -> str | None:
        if path is not None and not Path(path).exists():
            raise ValueError(f"no such file or folder: {path}")
        return path

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if (self.profile is None) == (self.trace is None):
            raise ValueError("give exactly one of 'profile' or 'trace'")
        return self


class Endpoint(Strict):
    url: str
    name: str | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parse_endpoint(url)  # one line saying what to fix (harness/driver/endpoint.py)
        return url


class EngineTargetConfig(Strict):
    """The reference engine as the target: in-process or `harness serve` processes."""

    mode: Literal["inprocess", "http"] = "inprocess"
    replicas: int = Field(default=1, ge=1, le=64)  # fleets of in-process replicas: up to 64
    options: dict[str, Any] = Field(default_factory=dict)  # EngineConfig fields (vLLM names)


class TargetConfig(Sending, HTTPSettings):
    """What serves the requests (the engine or endpoints) and how they are sent: the HTTP
    target's settings are its own model (`HTTPSettings`), composed here."""

    kind: Literal["engine", "endpoints"] = "engine"
    engine: EngineTargetConfig = EngineTargetConfig()
    endpoints: tuple[Endpoint, ...] = ()
    model: str | None = Field(
        None,
        description="model name sent in each request (default: the engine's served name; "
        "required for endpoints)",
    )
    api_key_env: str | None = Field(
        None,
        description="read the API key (sent as a bearer token) from this environment variable",
    )  # its NAME, never the key
    api_key_file: str | None = Field(
        None, description="read the API key from this file (first line)"
    )
    scrape_metrics: bool = Field(
        True, description="read the endpoints' Prometheus /metrics before and after the run"
    )
    context_overflow: Literal["send", "skip", "trim"] = Field(
        "send",
        description="a request past the server's max_model_len (from /v1/models): send it and "
        "record the refusal, skip it, or trim its max_tokens to fit (harness/driver/context_limit.py)",
    )
    block_size: int | None = Field(
        None,
        gt=0,
        description="server KV block size, kept in the manifest: the analyzer's ideal uses it "
        "when it cannot detect the server's cache granularity (unset: the engine's block_size, "
        "else 16)",
    )

    @model_validator(mode="after")
    def _endpoints_given(self) -> TargetConfig:
        if self.kind == "endpoints" and not self.endpoints:
            raise ValueError("kind 'endpoints' needs at least one entry in 'endpoints'")
        if self.kind == "engine" and self.endpoints:
            raise ValueError("'endpoints' is only for kind 'endpoints'")
        return self

    @model_validator(mode="after")
    def _cache_rules_of_the_api(self) -> TargetConfig:
        self.cache_rules.check(self.api)
        return self

    @model_validator(mode="after")
    def _one_credential(self) -> TargetConfig:
        """A URL's user:password is sent as Basic auth, the key as a Bearer token: one request
        cannot carry both (one Authorization header), so the two together are refused."""
        given = [
            f"target.{k}" for k in ("api_key_env", "api_key_file") if getattr(self, k) is not None
        ]
        given += [f"target.headers.{k}" for k in self.headers if k.lower() == "authorization"]
        with_user = [i for i, e in enumerate(self.endpoints) if parse_endpoint(e.url).credentials]
        if given and with_user:
            raise ValueError(
                f"endpoints.{with_user[0]}.url holds user:password@ and {given[0]} gives an API "
                "key too: a request carries one Authorization header; give one of the two"
            )
        return self


class SweepAxis(Strict):
    param: str  # dotted scenario field, e.g. load.concurrency or target.engine.options.max_num_seqs
    values: tuple[Any, ...] = Field(min_length=1)  # a mapping value is merged into a mapping field
    labels: tuple[str, ...] | None = Field(
        None, description="the points' names (their folders), one per value; default param=value"
    )

    @model_validator(mode="after")
    def _labels(self) -> SweepAxis:
        if self.labels is not None and len(self.labels) != len(self.values):
            raise ValueError(f"{len(self.labels)} labels for {len(self.values)} values")
        if self.labels is not None and any(not re.fullmatch(r"[\w.+=-]+", x) for x in self.labels):
            raise ValueError("labels are folder names: letters, digits, '_', '.', '+', '=', '-'")
        return self

    def point(self, doc: dict, i: int) -> str:
        """Set value i in `doc`; the point's label."""
        value, current = self.values[i], _get_path(doc, self.param)
        if isinstance(value, dict) and isinstance(current, dict):
            value = {**current, **value}
        set_path(doc, self.param, value)
        return self.labels[i] if self.labels else f"{self.param.rsplit('.', 1)[-1]}={value}"


class Execution(Strict):
    backend: Literal["local", "ray"] = "local"
    workers: int = Field(default=1, ge=1)
    address: str = "auto"


class Scenario(Strict):
    name: str
    description: str = ""
    workload: Workload
    target: TargetConfig = TargetConfig()
    load: Load = Load()
    slos: dict[str, float | str] = Field(default_factory=dict)  # e.g. ttft_p90: 2s, tpot: 50ms
    gpus: int = Field(default=1, ge=1)
    sweep: tuple[SweepAxis, ...] = Field(default=(), max_length=2)
    execution: Execution = Execution()
    results_dir: str = "results"
    run_id: str | None = Field(
        None, description="run id written to records and manifest (unset: the run folder's name)"
    )

    def to_dict(self) -> dict:
        """The document, in the files' keys."""
        return self.model_dump(mode="json", by_alias=True)

    def points(self) -> list[tuple[str, Scenario]]:
        """The sweep's points as (label, scenario without sweep); one point when no sweep."""
        if not self.sweep:
            return [("", self)]
        base = self.to_dict()
        base["sweep"] = []
        out = []
        for combo in itertools.product(*(range(len(axis.values)) for axis in self.sweep)):
            doc = copy.deepcopy(base)
            labels = [axis.point(doc, i) for axis, i in zip(self.sweep, combo, strict=True)]
            out.append(("-".join(labels), validate(doc, source="<sweep point>")))
        return out


def field_info(dotted: str) -> FieldInfo:
    """The declaration of a scenario field by its files' key, e.g. "load.max_duration_s"."""
    model: Any = Scenario
    for key in dotted.split("."):
        by_key = {f.alias or name: f for name, f in model.model_fields.items()}
        if key not in by_key:
            raise KeyError(f"no scenario field {dotted!r}")
        info = by_key[key]
        model = info.annotation
    return info


def default_of(dotted: str) -> Any:
    """The default of a scenario field, e.g. default_of("load.concurrency") == 4."""
    return field_info(dotted).get_default(call_default_factory=True)


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
    if isinstance(value, tuple | list):
        return ", ".join(map(str, value))
    return str(value)


# ---- loading -------------------------------------------------------------------------------


def parse_set(item: str) -> tuple[str, Any]:
    return yamlconf.parse_set(item, ScenarioError)


def set_path(doc: dict, dotted: str, value: Any) -> None:
    yamlconf.set_path(doc, dotted, value, ScenarioError)


def _get_path(doc: dict, dotted: str) -> Any:
    node: Any = doc
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


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
    _check_parts(scenario, source, root, overrides)
    return scenario


def _check_parts(
    scenario: Scenario, source: str, root: yaml.Node | None, overrides: tuple[str, ...]
) -> None:
    """Fields checked by the parts that own them: each SLO, the engine options. An error names
    the field the part found wrong (`slos.ttft_p90`, `target.engine.options.block_size`) once,
    at its own line (none when an override set it)."""
    from harness.analysis.slo import parse_slo
    from harness.engine.config import EngineConfig
    from harness.errors import HarnessError

    checks: list[tuple[tuple[str, ...], Callable[[], object]]] = [
        (("slos", name), functools.partial(parse_slo, name, value, source=f"slos.{name}"))
        for name, value in scenario.slos.items()
    ]
    if scenario.target.kind == "engine":
        options = dict(scenario.target.engine.options)
        checks.append((("target", "engine", "options"), lambda: EngineConfig.from_dict(options)))
    for loc, check in checks:
        try:
            check()
        except HarnessError as exc:
            at, reason = _found_at(loc, exc)
            line = None if yamlconf.overridden(at, overrides) else yamlconf.line_of(root, at)
            raise ScenarioError(reason, path=source, line=line, field=".".join(at)) from None


def _found_at(loc: tuple[str, ...], exc: Exception) -> tuple[tuple[str, ...], str]:
    """The field a part's error is about (its own field, under `loc`) and its reason alone: an
    InputError's field, or the `field 'x': ...` an EngineConfig error opens with."""
    if isinstance(exc, InputError) and exc.field:
        field, reason = tuple(exc.field.split(".")), exc.reason
    elif named := _NAMED.match(str(exc)):
        field, reason = (named[1],), named[2]
    else:
        return loc, str(exc)
    return (field if field[: len(loc)] == loc else (*loc, *field)), reason


_NAMED = re.compile(r"field '([^']+)': (.*)", re.S)


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
    network = target.get("network") or {}
    if network.get("proxy") not in (None, "env", "none"):  # a proxy URL may hold a password
        network["proxy"] = _proxy_redacted(network["proxy"])
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _proxy_redacted(url: str) -> str:
    """A proxy URL without its credentials (it stays usable without them, or says what is
    missing when re-run: a 407 from the proxy)."""
    scheme, sep, rest = url.rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"
