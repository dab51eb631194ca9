"""The headline metrics `harness compare` checks: each a pooled value, the evidence it is judged on
(its samples grouped by task, or by time block; `evidence.py`), and how to recompute it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis import speculation
from harness.analysis.compare import evidence
from harness.analysis.compare.evidence import Clusters, Statistic
from harness.analysis.metrics import completion_tokens, prompt_tokens, run_window
from harness.analysis.summary_types import Analysis

WINDOWS = 10  # per run, for rates that have no per-request distribution


class Side:
    """One side of a comparison: one run or several repeats, pooled."""

    def __init__(self, analyses: list[Analysis]) -> None:
        self.analyses = analyses

    @property
    def names(self) -> list[str]:
        return [a.run.name for a in self.analyses]

    def counts(self) -> dict:
        return {
            "ok": sum(a.summary["requests_ok"] for a in self.analyses),
            "failed": sum(a.summary["requests_failed"] for a in self.analyses),
        }

    @cached_property
    def per_request(self) -> pd.DataFrame:
        return pd.concat([a.per_request for a in self.analyses], ignore_index=True)

    @cached_property
    def misses(self) -> pd.DataFrame:
        return pd.concat([a.misses for a in self.analyses], ignore_index=True)

    def column(self, name: str) -> np.ndarray:
        v = self.per_request[name].to_numpy(dtype=float)
        return v[np.isfinite(v)]

    def itl(self) -> np.ndarray:
        return np.concatenate([a.itl.samples() for a in self.analyses])

    def failed_flags(self) -> np.ndarray:
        return np.concatenate(
            [(_judged(a)["status"] != "ok").to_numpy(dtype=float) for a in self.analyses]
        )

    def mean_of(self, key: str, sub: str | None = None) -> float | None:
        summaries: list[Mapping[str, Any]] = [a.summary for a in self.analyses]  # any key
        values = [s[key] if sub is None else s[key][sub] for s in summaries]
        values = [v for v in values if v is not None]
        return float(np.mean(values)) if values else None

    def windows(self, what: str) -> np.ndarray:
        return np.concatenate([_window_rates(a, what) for a in self.analyses])


def _window_rates(a: Analysis, what: str) -> np.ndarray:
    ok = a.run.ok
    start, end = run_window(ok)
    if end <= start or ok.empty:
        return np.array([])
    width = (end - start) / WINDOWS
    idx = np.minimum(
        ((ok["t_done"].to_numpy(dtype=float) - start) / width).astype(int), WINDOWS - 1
    )
    weights = {
        "requests": np.ones(len(ok)),
        "output": completion_tokens(ok),
        "tokens": np.nan_to_num(prompt_tokens(ok)) + np.nan_to_num(completion_tokens(ok)),
    }[what]
    per_window = np.bincount(idx, weights=np.nan_to_num(weights), minlength=WINDOWS) / width
    return per_window / a.summary["n_gpus"] if what == "tokens" else per_window


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def _inv(value: float | None) -> float | None:
    return 1.0 / value if value else None


def _hit_rate(side: Side) -> float | None:
    m = side.misses[side.misses["reported"]]
    prompt = m["prompt"].sum()
    return float(m["cached"].sum() / prompt) if prompt > 0 else None


def _tasks(a: Analysis, frame: pd.DataFrame) -> np.ndarray:
    """The task (main session) of each row of a frame indexed like the run's records."""
    return a.run.records.loc[frame.index, "task"].to_numpy()


def _per_request(name: str) -> Callable[[Analysis], Clusters]:
    return lambda a: Clusters.of(a.per_request[name], _tasks(a, a.per_request))


def _itl(a: Analysis) -> Clusters:
    tasks = _tasks(a, a.per_request)[a.itl.owner]
    return Clusters.of(a.itl.values, tasks, a.itl.weights)


def _windows(what: str) -> Callable[[Analysis], Clusters]:
    def clusters(a: Analysis) -> Clusters:
        rates = _window_rates(a, what)
        return Clusters.of(rates, np.arange(len(rates)))

    return clusters


def _hits(a: Analysis) -> Clusters:
    m = a.misses[a.misses["reported"]]
    return Clusters.of(m["cached"], _tasks(a, m), m["prompt"])


def _judged(a: Analysis):
    """The measured requests an error rate counts: those the run's own stop cancelled are not."""
    m = a.run.measured
    return m[m["status"] != "cancelled"]


def _failures(a: Analysis) -> Clusters:
    m = _judged(a)
    return Clusters.of((m["status"] != "ok").to_numpy(dtype=float), m["task"].to_numpy())


def _error_rate(side: Side) -> float | None:
    flags = side.failed_flags()
    return float(flags.mean()) if flags.size else None


@dataclass(frozen=True)
class Headline:
    key: str
    label: str
    better: str  # "lower" | "higher"
    value: Callable[[Side], float | None]  # the figure over the side's pooled runs
    evidence: Callable[[Analysis], Clusters]  # one run's samples, grouped by unit of evidence
    statistic: Statistic  # the figure recomputed from a bootstrap replicate of the samples
    # A server-wide figure (the /metrics counters over the run): no per-task samples, so no
    # interval; compare judges it on the size of its change alone and shows it only when measured.
    server_wide: bool = False
    # How run-to-run noise acts on it: "log" (a busy host scales a latency or a rate: changes are
    # ratios) or "linear" (a fraction such as a hit rate: changes are differences).
    scale: str = "log"


def _spec_value(key: str) -> Callable[[Side], float | None]:
    def value(side: Side) -> float | None:
        values = [v for a in side.analyses if (v := speculation.figure(a.summary, key)) is not None]
        return float(np.mean(values)) if values else None

    return value


def _no_samples(a: Analysis) -> Clusters:
    return Clusters.of([], [])


def _server_wide(key: str, label: str) -> Headline:
    return Headline(
        f"spec_{key}", label, "higher", _spec_value(key), _no_samples, evidence.mean, True, "linear"
    )


def _latency(name: str, label: str, q: int) -> Headline:
    return Headline(
        f"{name}_p{q}",
        f"{label} p{q} (s)",
        "lower",
        lambda s: _pct(s.column(name), q),
        _per_request(name),
        evidence.percentile(q),
    )


HEADLINE: tuple[Headline, ...] = (
    *(_latency("ttft", "TTFT", q) for q in (50, 90, 99)),
    *(_latency("tpot", "TPOT", q) for q in (50, 90, 99)),
    Headline(
        "itl_p90",
        "ITL p90 (s, token-weighted)",
        "lower",
        lambda s: _pct(s.itl(), 90),
        _itl,
        evidence.weighted_percentile(90),
    ),
    *(_latency("e2el", "E2EL", q) for q in (50, 90, 99)),
    Headline(
        "interactivity_p90",
        "P90 interactivity (tok/s/user)",
        "higher",
        lambda s: _inv(_pct(s.column("tpot"), 90)),
        _per_request("tpot"),
        evidence.inverse_percentile(90),
    ),
    Headline(
        "e2e_interactivity_p90",
        "E2E-norm. interactivity (tok/s/user)",
        "higher",
        lambda s: _inv(_pct(s.column("e2el_per_token"), 90)),
        _per_request("e2el_per_token"),
        evidence.inverse_percentile(90),
    ),
    Headline(
        "tpgs",
        "TPGS (tok/s/GPU)",
        "higher",
        lambda s: s.mean_of("tpgs"),
        _windows("tokens"),
        evidence.mean,
    ),
    Headline(
        "requests_per_s",
        "request throughput (req/s)",
        "higher",
        lambda s: s.mean_of("throughput", "requests_per_s"),
        _windows("requests"),
        evidence.mean,
    ),
    Headline(
        "output_tokens_per_s",
        "output throughput (tok/s)",
        "higher",
        lambda s: s.mean_of("throughput", "output_tokens_per_s"),
        _windows("output"),
        evidence.mean,
    ),
    Headline(
        "cache_hit_rate",
        "cache hit rate",
        "higher",
        _hit_rate,
        _hits,
        evidence.ratio,
        scale="linear",
    ),
    Headline(
        "error_rate",
        "failed requests (fraction)",
        "lower",
        _error_rate,
        _failures,
        evidence.mean,
        scale="linear",
    ),
    # speculative decoding, from the servers' /metrics (analysis/speculation.py)
    _server_wide("acceptance_rate", "spec-decode acceptance rate"),
    _server_wide("mean_accepted_length", "spec-decode mean accepted length (tok/step)"),
)
