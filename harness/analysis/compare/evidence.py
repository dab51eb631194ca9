"""The evidence behind a compared figure: an interval from a bootstrap over tasks, not requests.

The requests of one task (a main session and its subagents) share a context, a cache and a
place in the load, and all the requests of one run share the machine and the server's state: as
samples they are not independent, so a test that counts each request as one (Mann-Whitney U on
the pooled requests) calls ordinary run-to-run noise significant. Here the unit is the task:
each replicate draws a run's tasks with replacement and recomputes the figure from their
requests; a rate with no per-request distribution (TPGS, throughput) draws time blocks instead.
When a side holds two or more runs, each replicate first draws the runs with replacement, so the
between-run spread is in the interval too. Each figure (each percentile its own) gets the interval
of its own change, (run - baseline) relative to |baseline| and as a plain difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

REPLICATES = 1000
SEED = 20260  # fixed: the same runs always get the same verdict


@dataclass(frozen=True)
class Clusters:
    """One run's samples and the unit of evidence (a task, or a time block) each belongs to."""

    values: np.ndarray
    weights: np.ndarray  # per sample (tokens of a chunk, prompt tokens); 1 when unweighted
    unit: np.ndarray  # per sample: its unit, 0 .. units - 1
    units: int

    @classmethod
    def of(cls, values, groups, weights=None) -> Clusters:
        values = np.asarray(values, dtype=float)
        weights = np.ones(len(values)) if weights is None else np.asarray(weights, dtype=float)
        keep = np.isfinite(values) & np.isfinite(weights)
        groups = np.asarray(groups)[keep].astype(str)
        uniques, unit = np.unique(groups, return_inverse=True)
        return cls(values[keep], weights[keep], unit.astype(np.int64), len(uniques))


# A figure recomputed in every replicate at once: (values sorted ascending, their weights, the
# replicates' multiplicity of each value, B x N) -> B values, NaN where undefined.
Statistic = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
CELLS = 4_000_000  # replicates x samples held at once (32 MB of float64)


def replicates(
    runs: list[Clusters], stat: Statistic, rng: np.random.Generator, n: int = REPLICATES
) -> np.ndarray:
    """`n` bootstrap values of `stat` over a side's runs. A replicate draws the runs with
    replacement (when there are two or more), then each drawn run's units with replacement; a
    sample counts as often as its unit (times its run) was drawn."""
    size = sum(c.values.size for c in runs)
    if not runs or size == 0:
        return np.full(n, np.nan)
    values, weights, unit, offsets = _pooled(runs)
    step = max(1, CELLS // size)
    parts = [
        stat(values, weights, _multiplicity(runs, offsets, min(step, n - i), rng)[:, unit])
        for i in range(0, n, step)
    ]
    return np.concatenate(parts)


def value(runs: list[Clusters], stat: Statistic) -> float | None:
    """The figure over a side's runs as measured (every sample once), or None when undefined."""
    if not any(c.values.size for c in runs):
        return None
    values, weights, _, _ = _pooled(runs)
    v = float(stat(values, weights, np.ones((1, values.size)))[0])
    return None if np.isnan(v) else v


def _pooled(runs: list[Clusters]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The runs' samples sorted by value, their weights and units (numbered across the runs),
    and each run's first unit number."""
    order = np.argsort(np.concatenate([c.values for c in runs]), kind="stable")
    offsets = np.cumsum([0] + [c.units for c in runs])
    unit = np.concatenate([c.unit + o for c, o in zip(runs, offsets, strict=False)])
    return (
        np.concatenate([c.values for c in runs])[order],
        np.concatenate([c.weights for c in runs])[order],
        unit[order],
        offsets,
    )


def _multiplicity(
    runs: list[Clusters], offsets: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """n x (all units): how often each unit is drawn in each of n replicates."""
    run_draws = (
        rng.multinomial(len(runs), np.full(len(runs), 1 / len(runs)), size=n)
        if len(runs) > 1
        else np.ones((n, 1), dtype=np.int64)
    )
    per_run = [
        rng.multinomial(c.units, np.full(c.units, 1 / c.units), size=n) * run_draws[:, [j]]
        if c.units
        else np.zeros((n, 0), dtype=np.int64)
        for j, c in enumerate(runs)
    ]
    return np.concatenate(per_run, axis=1).astype(float)


@dataclass(frozen=True)
class Interval:
    """The bootstrap interval of a change at level 1 - alpha, relative and absolute."""

    relative: tuple[float, float] | None  # of (run - baseline) / |baseline|; None from a zero base
    absolute: tuple[float, float]  # of run - baseline, in the figure's own units
    p_value: float  # two-sided: twice the share of replicates on the far side of no change


def change_interval(base: np.ndarray, cand: np.ndarray, alpha: float) -> Interval | None:
    both = np.isfinite(base) & np.isfinite(cand)
    if both.sum() < 0.9 * len(base):
        return None  # the figure is undefined in too many replicates (too few samples) to judge
    b, r = base[both], cand[both]
    diff = r - b
    q = (100 * alpha / 2, 100 * (1 - alpha / 2))
    absolute = (float(np.percentile(diff, q[0])), float(np.percentile(diff, q[1])))
    nonzero = b != 0
    relative = None
    if nonzero.all():
        rel = diff / np.abs(b)
        relative = (float(np.percentile(rel, q[0])), float(np.percentile(rel, q[1])))
    tail = min((diff <= 0).mean(), (diff >= 0).mean())
    return Interval(relative, absolute, float(min(1.0, 2 * tail)))


def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


# ---- statistics: the figure in every replicate, from its multiplicities ------------------------


def weighted_percentile(q: float) -> Statistic:
    """numpy's linear percentile of the samples repeated by weight (a token counts once), the
    method summary.json uses (`metrics.weighted_percentiles`): rank (n - 1) q / 100 of the
    expanded, sorted samples, interpolated between its neighbours."""

    def stat(v: np.ndarray, w: np.ndarray, mult: np.ndarray) -> np.ndarray:
        cum = np.cumsum(mult * w, axis=1)
        total = cum[:, -1]
        rank = np.maximum(total - 1, 0) * q / 100
        lo = np.floor(rank)
        below = v[np.minimum((cum <= lo[:, None]).sum(axis=1), len(v) - 1)]
        hi = np.minimum(lo + 1, np.maximum(total - 1, 0))
        above = v[np.minimum((cum <= hi[:, None]).sum(axis=1), len(v) - 1)]
        return np.where(total > 0, below + (above - below) * (rank - lo), np.nan)

    return stat


def percentile(q: float) -> Statistic:
    pick = weighted_percentile(q)
    return lambda v, w, mult: pick(v, np.ones_like(w), mult)


def inverse_percentile(q: float) -> Statistic:
    pick = percentile(q)

    def stat(v: np.ndarray, w: np.ndarray, mult: np.ndarray) -> np.ndarray:
        p = pick(v, w, mult)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(p > 0, 1.0 / p, np.nan)

    return stat


def mean(v: np.ndarray, w: np.ndarray, mult: np.ndarray) -> np.ndarray:
    return ratio(v, np.ones_like(v), mult)


def ratio(v: np.ndarray, w: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """Σ values / Σ weights: a rate of sums (cached tokens over prompt tokens)."""
    total = mult @ w
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, (mult @ v) / total, np.nan)
