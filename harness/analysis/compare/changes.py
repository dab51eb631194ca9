"""One row of a comparison: a headline metric, baseline vs candidate, its change, interval and verdict.

Each run's figure is one sample (`noise.py`). A row is `regressed` when its interval (between
runs, or from screened history) lies wholly on the worse side of no change AND the change is at
least its threshold (asv's rule: a test and a size); `no change detected` when the interval rules
out a worsening as large as the threshold; `inconclusive` otherwise. With one run a side and no
history there is no interval across runs: such a row is never `regressed`; it is `no change
detected` only when even a generous allowance (`noise.GENEROUS` within-run SDs) stays under the
threshold. The threshold is the row's `--fail-on` entry, else `--min-change` in the metric's
worse direction. Figures the sides do not measure alike get no verdict: "not comparable".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from harness.analysis.compare import evidence, noise
from harness.analysis.compare.nights import night_of
from harness.analysis.compare.sides import HEADLINE, Headline, Side
from harness.analysis.summary_types import Analysis
from harness.errors import InputError

REGRESSED, NO_CHANGE, INCONCLUSIVE = "regressed", "no change detected", "inconclusive"

_SPEC = re.compile(
    r"^\s*(?P<key>[a-z0-9_]+)\s*:\s*(?P<sign>[+-])(?P<num>\d+(?:\.\d+)?)(?P<pct>%?)\s*$"
)


@dataclass(frozen=True)
class Threshold:
    key: str
    increase: bool  # '+': worse when the metric rises past it; '-': when it falls
    amount: float
    relative: bool  # '%': a fraction of the baseline; otherwise in the metric's own units

    def target(self, baseline: float) -> float:
        """The figure at which the threshold is crossed, from `baseline`."""
        step = self.amount * abs(baseline) if self.relative else self.amount
        return baseline + step if self.increase else baseline - step

    def __str__(self) -> str:
        return f"{self.key}:{'+' if self.increase else '-'}{self.amount * (100 if self.relative else 1):g}{'%' if self.relative else ''}"


def parse_fail_on(spec: str | None) -> list[Threshold]:
    if not spec:
        return []
    known = {m.key for m in HEADLINE}
    out = []
    for item in spec.split(","):
        m = _SPEC.match(item)
        if m is None:
            raise InputError(
                f"bad threshold {item.strip()!r}: expected METRIC:+N% or METRIC:-N",
                field="--fail-on",
            )
        if m["key"] not in known:
            raise InputError(
                f"unknown metric {m['key']!r} (known: {', '.join(sorted(known))})",
                field="--fail-on",
            )
        relative = bool(m["pct"])
        amount = float(m["num"]) / (100 if relative else 1)
        out.append(Threshold(m["key"], m["sign"] == "+", amount, relative))
    return out


@dataclass
class MetricChange:
    key: str
    label: str
    better: str  # "lower" | "higher"
    baseline: float | None  # the side's figure: the mean of its runs' (geometric on log rows)
    run: float | None
    change: float | None  # relative, the estimator's: the interval is drawn about it
    significant: bool  # the interval across runs excludes 0 and |change| >= min_change
    direction: str  # "worse", "better" (significant) or "~"
    verdict: str | None  # regressed | no change detected | inconclusive; None: not comparable
    n_baseline: int  # samples behind the figure (requests, tokens or time blocks)
    n_run: int
    interval: tuple[float, float] | None = None  # of the relative change, at level 1 - alpha
    interval_abs: tuple[float, float] | None = None  # of run - baseline
    units: tuple[int, int] = (0, 0)  # runs per side
    why_not: str | None = None  # why the sides are not comparable on this figure
    band: float | None = None  # one run's SD between runs, relative (None: unknown)
    band_source: str | None = None  # "between 3+3 runs", "history of 4 runs", "one run: ..."
    threshold: str | None = None  # what the verdict was judged against
    gated: bool = True  # counts toward the overall verdict
    smallest_detectable: float | None = None  # relative change this evidence could have seen
    runs_needed: int | None = None  # inconclusive: more runs a side that would likely decide it
    nights_needed: int | None = None  # inconclusive by night: more earlier nights, likewise
    heading: str | None = None  # inconclusive: the verdict more runs would most likely give


@dataclass
class Figures:
    """One metric's figure in each run of a side, and each run's within-run bootstrap."""

    values: list[float]
    replicates: list[np.ndarray | None]
    samples: int
    runs: int
    waits: list[float | None] = field(default_factory=list)  # each run's CPU wait share
    nights: list[str] = field(default_factory=list)  # each run's night (nights.night_of)


def figures(metric: Headline, analyses: list[Analysis], rng, boot: bool = True) -> Figures:
    out = Figures([], [], 0, len(analyses))
    for a in analyses:
        v = metric.value(Side([a]))
        if v is None:
            continue
        out.waits.append((a.summary.get("client") or {}).get("run_queue_wait_share"))
        out.nights.append(night_of(a))
        size, drawn = _bootstrap(metric, a, rng, boot)
        out.samples += size
        out.values.append(v)
        out.replicates.append(drawn)
    return out


def _bootstrap(metric: Headline, a: Analysis, rng, boot: bool) -> tuple[int, np.ndarray | None]:
    """A run's samples of `metric` and its within-run bootstrap, drawn once per run: a gate
    judges the same runs again after every pair, and a calibration in many windows (20 runs x
    17 rows x 1000 replicates a look, else)."""
    cache = a.__dict__.setdefault("_replicates", {})
    key = (metric.key, boot)
    if key not in cache:
        clusters = metric.evidence(a)
        drawn = boot and clusters.values.size and clusters.units >= 2
        reps = evidence.replicates([clusters], metric.statistic, rng) if drawn else None
        cache[key] = (int(clusters.values.size), reps)
    return cache[key]


def within_var(reps: np.ndarray | None, scale: str) -> float | None:
    if reps is None:
        return None
    r = reps[np.isfinite(reps)]
    if scale == "log":
        r = np.log(r[r > 0])
    if r.size < 0.9 * reps.size:
        return None  # the figure is undefined in too many replicates (too few samples)
    return float(np.var(r, ddof=1))


def row(
    metric: Headline,
    base: Figures,
    cand: Figures,
    history: list[float],
    threshold: Threshold,
    alpha: float,
    min_change: float,
    why_not: str | None = None,
    paired: bool = False,
    history_nights: list[str] | None = None,
) -> MetricChange:
    """The row of `metric`: its figures, interval, band and verdict against `threshold`.
    `paired`: base.values[i] and cand.values[i] ran back to back (`noise.paired_spread`).
    `history_nights`: each history figure's night, given where the comparison is judged by night
    (the verdict's `nights.apart`, decided once for every row): the night is the unit
    (`noise.night_spread`)."""
    out = MetricChange(
        metric.key, metric.label, metric.better, None, None, None, False, "~", None,
        base.samples, cand.samples, units=(base.runs, cand.runs), threshold=str(threshold),
    )  # fmt: skip
    if not base.values or not cand.values:
        why_not = why_not or "measured on one side only"
    x, scale = noise.on_scale([*base.values, *cand.values, *history], metric.scale)
    nb, nc = len(base.values), len(cand.values)
    xb, xc, xh = x[:nb], x[nb : nb + nc], x[nb + nc :]
    back = np.exp if scale == "log" else (lambda v: v)
    if nb:
        out.baseline = float(back(xb.mean()))
    if nc:
        out.run = float(back(xc.mean()))
    if out.baseline not in (None, 0) and out.run is not None:
        out.change = (out.run - out.baseline) / abs(out.baseline)
    if why_not is not None:
        out.why_not = why_not
        return out
    within = (
        [within_var(r, scale) for r in base.replicates],
        [within_var(r, scale) for r in cand.replicates],
    )
    if paired:
        waits = (base.waits, cand.waits)
        s = noise.adjusted_spread(xb, xc, waits, within, alpha) or noise.paired_spread(
            xb, xc, within, alpha
        )
    elif history_nights is not None:
        keys = (base.nights, cand.nights, history_nights)
        s = noise.night_spread(xb, xc, xh, keys, within, alpha)
    else:
        s = noise.spread(xb, xc, xh, within, alpha)
    out.change = _estimate(s, out.baseline, scale)
    _interval(out, s, scale)
    _decide(out, s, threshold, scale, alpha, min_change)
    return out


def _estimate(s: noise.Spread, baseline: float | None, scale: str) -> float | None:
    """The relative change the interval is drawn about: the estimator's own (the pairs' mean
    difference, or the wait-corrected one), never a ratio of the sides' means beside it."""
    if scale == "log":
        return float(np.expm1(s.change))
    return None if not baseline else s.change / abs(baseline)


def _interval(out: MetricChange, s: noise.Spread, scale: str) -> None:
    """The shown interval (between runs; with one run a side, the within-run one) and band."""
    # one run a side: the within-run interval; one night a side: none (nights differ by more)
    half = s.half_width if s.half_width is not None else None if s.band.nights else s.within
    b = out.baseline
    assert b is not None  # a comparable row has figures on both sides
    out.band_source = s.band.source
    if scale == "log":
        out.band = None if s.band.sd is None else float(np.expm1(s.band.sd))
        if half is not None:
            lo, hi = np.expm1(s.change - half), np.expm1(s.change + half)
            out.interval = (float(lo), float(hi))
            out.interval_abs = (float(b * lo), float(b * hi))
        return
    out.band = None if s.band.sd is None or b == 0 else s.band.sd / abs(b)
    if half is not None:
        out.interval_abs = (s.change - half, s.change + half)
        if b != 0:
            out.interval = (out.interval_abs[0] / abs(b), out.interval_abs[1] / abs(b))


def _on(scale: str, value: float) -> float:
    if scale != "log":
        return value
    return float(np.log(value)) if value > 0 else -np.inf


def _decide(
    out: MetricChange,
    s: noise.Spread,
    t: Threshold,
    scale: str,
    alpha: float,
    min_change: float,
) -> None:
    b = out.baseline
    assert b is not None
    sign = 1.0 if t.increase else -1.0
    worse = sign * s.change  # the change, positive in the gate's worse direction
    limit = 0.0 if t.relative and b == 0 else sign * (_on(scale, t.target(b)) - _on(scale, b))
    half = s.half_width
    if half is not None:
        large = abs(out.change) >= min_change if out.change is not None else s.change != 0
        if large and abs(s.change) > half:
            out.significant = True
            up = s.change > 0
            out.direction = "worse" if up == (out.better == "lower") else "better"
        if worse - half > 0 and worse >= limit:
            out.verdict = REGRESSED
        elif worse + half <= limit:
            out.verdict = NO_CHANGE
        else:
            out.verdict = INCONCLUSIVE
    else:
        allow = s.allowance
        out.verdict = NO_CHANGE if allow is not None and worse + allow <= limit else INCONCLUSIVE
        half = allow
    out.smallest_detectable = _relative(half, b, scale)
    if out.verdict == INCONCLUSIVE:
        out.heading = REGRESSED if worse >= limit else NO_CHANGE
        distance = worse if worse >= limit else limit - worse
        needed = noise.runs_needed(s, distance, alpha)
        if s.band.nights:
            out.nights_needed = needed
        else:
            out.runs_needed = needed


def _relative(half: float | None, baseline: float, scale: str) -> float | None:
    if half is None or not np.isfinite(half):
        return None
    if scale == "log":
        return float(np.expm1(half))
    return None if baseline == 0 else half / abs(baseline)


def default_threshold(metric: Headline, min_change: float) -> Threshold:
    """`--min-change` in the metric's worse direction: the gate of a row no `--fail-on` names."""
    return Threshold(metric.key, metric.better == "lower", min_change, True)
