"""Service-level objectives and goodput: requests (and tasks) per second meeting every SLO.

An SLO is `METRIC[_pQ]=VALUE`: `ttft_p90=2s`, `tpot=50ms`, `e2el_p99=30s`, `interactivity_p90=20`.
Per request, a request meets it when its own value is within the bound (the `_pQ` suffix is
ignored there); per run, `_pQ` also asks whether the run's Q-th percentile is within it.
Latencies are upper bounds (seconds; `ms`/`us`/`s` suffixes), interactivity a lower bound (tok/s).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import InputError
from harness.yamlconf import did_you_mean

LATENCIES = ("ttft", "tpot", "itl", "e2el", "e2el_per_token")
RATES = ("interactivity",)
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_PATTERN = re.compile(r"^(?P<metric>[a-z_2]+?)(?:_p(?P<q>\d+(?:\.\d+)?))?$")


@dataclass(frozen=True)
class Slo:
    name: str  # as given, e.g. "ttft_p90"
    metric: str  # per-request column, e.g. "ttft"
    percentile: float | None
    bound: float  # seconds for latencies, tokens/s for interactivity

    @property
    def is_upper(self) -> bool:
        return self.metric in LATENCIES

    def met_by(self, values: np.ndarray) -> np.ndarray:
        """Per request; a request without the metric (one token has no TPOT) cannot violate it."""
        v = np.asarray(values, dtype=float)
        within = v <= self.bound if self.is_upper else v >= self.bound
        return within | np.isnan(v)


def parse_slos(
    items: Iterable[str] | Mapping[str, object] | None, *, source: str = "--slo"
) -> list[Slo]:
    if not items:
        return []
    pairs = items.items() if isinstance(items, Mapping) else (_split(s, source) for s in items)
    return [parse_slo(str(k), v, source=source) for k, v in pairs]


def _split(text: str, source: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise InputError(f"expected METRIC=VALUE (e.g. ttft_p90=2s), got {text!r}", field=source)
    return name.strip(), value.strip()


def parse_slo(name: str, value: object, *, source: str = "--slo") -> Slo:
    m = _PATTERN.match(name)
    if m is None or m["metric"] not in LATENCIES + RATES:
        known = ", ".join(LATENCIES + RATES)
        metric = m["metric"] if m is not None else name
        raise InputError(
            f"unknown SLO metric {name!r} (known: {known}, optionally with _pQ)"
            + did_you_mean(metric, LATENCIES + RATES),
            field=source,
        )
    q = float(m["q"]) if m["q"] else None
    if q is not None and not 0 < q <= 100:
        raise InputError(f"percentile in {name!r} must be in (0, 100]", field=source)
    bound = _value(value, m["metric"] in LATENCIES, name, source)
    return Slo(name=name, metric=m["metric"], percentile=q, bound=bound)


def _value(value: object, is_latency: bool, name: str, source: str) -> float:
    text = str(value).strip().lower()
    scale = 1.0
    if is_latency:
        for suffix in ("ms", "us", "s"):
            if text.endswith(suffix):
                text, scale = text[: -len(suffix)], _UNITS[suffix]
                break
    try:
        number = float(text) * scale
    except ValueError:
        raise InputError(
            f"SLO {name}: {value!r} is not a number (e.g. 2s, 250ms, 20)", field=source
        ) from None
    if not np.isfinite(number) or number < 0:
        raise InputError(f"SLO {name}: must be a finite number >= 0, got {value!r}", field=source)
    return number


def goodput(
    per_request: pd.DataFrame, slos: list[Slo], duration: float, task_ids: pd.Series
) -> dict | None:
    """Requests/s and tasks/s meeting every SLO, and whether each percentile SLO holds run-wide."""
    if not slos:
        return None
    good = np.ones(len(per_request), dtype=bool)
    for slo in slos:
        good &= slo.met_by(per_request[slo.metric].to_numpy())
    tasks = pd.Series(good, index=per_request.index).groupby(task_ids.to_numpy()).all()
    rate = (lambda n: n / duration) if duration > 0 else (lambda n: None)
    return {
        "slos": {s.name: s.bound for s in slos},
        "requests_meeting": int(good.sum()),
        "requests": int(len(good)),
        "fraction": float(good.mean()) if len(good) else None,
        "requests_per_s": rate(int(good.sum())),
        "tasks_meeting": int(tasks.sum()),
        "sessions_per_s": rate(int(tasks.sum())),
        "attained": {s.name: _attained(s, per_request) for s in slos if s.percentile is not None},
    }


def _attained(slo: Slo, per_request: pd.DataFrame) -> dict:
    v = per_request["tpot" if slo.metric == "interactivity" else slo.metric].to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    if not v.size or slo.percentile is None:
        return {"value": None, "met": None}
    value = float(np.percentile(v, slo.percentile))
    if slo.metric == "interactivity":  # the value that q % of requests reach: 1 / pq(TPOT)
        value = 1.0 / value if value > 0 else float("inf")
    met = value <= slo.bound if slo.is_upper else value >= slo.bound
    return {"value": value, "met": bool(met)}
