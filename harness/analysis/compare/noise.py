"""How much a figure moves between runs of one configuration, and the interval of a change.

The run is the unit of evidence: each run's figure is one sample. The between-run standard
deviation is pooled from the baseline side together with its screened history (past runs of the
same configuration) and from the candidate side's repeats; the interval of the change of the
sides' means is Student's t at that many degrees of freedom. A within-run bootstrap measures one
run, not the machine it ran on, so it can only widen the interval (it is a floor), never narrow
it. With one run a side and no history there is no spread to estimate: the change is reported,
but it cannot be called significant across runs.

Runs taken in interleaved pairs (a_i and b_i back to back, as `harness gate` runs them) are judged
on the within-pair differences instead (`paired_spread`): log(b_i / a_i) on a log row, a t
interval over the pairs at pairs - 1 degrees of freedom. A host that drifts slowly moves both runs
of a pair alike, so the drift cancels in the difference rather than widening the band. From
`MIN_ADJUSTED_PAIRS` pairs whose runs all recorded how long their threads waited for a CPU, the
differences are corrected for the two runs' different contention (`adjusted_spread`): a pair
whose candidate waited more is slower for that reason alone, and the host changes within a pair
too (two 10 s runs on a shared host rarely see the same load).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.compare import nights

# With no between-run spread, "no change detected" needs the change to stay under the threshold
# even with this many within-run SDs of noise (docs/metrics.md, "Verdicts"): on the recorded
# nightly fixtures (nights 1-3) the between-run SD was up to 4.4x the within-run one (TPOT p90).
GENEROUS = 10.0
# ...and "how many more runs" guesses the spread at this many within-run SDs (those nights'
# latency rows: 1.7x to 4.4x, median 2.5).
TYPICAL = 3.0
MAX_MORE_RUNS = 20  # past this many more runs a side, "how many more would decide it" is None


def on_scale(values: list[float], scale: str) -> tuple[np.ndarray, str]:
    """The figures on the scale their noise acts on: log where every one is positive."""
    v = np.asarray(values, dtype=float)
    if scale == "log" and v.size and (v > 0).all():
        return np.log(v), "log"
    return v, "linear"


@dataclass(frozen=True)
class Band:
    """The between-run SD of one run's figure (on the row's scale) and where it came from."""

    sd: float | None  # None: no two runs of one side, so no spread to estimate
    df: int
    source: str  # "between 3+3 runs", "history of 4 runs", "paired over 4 pairs", "one run: ..."
    pairs: int = 0  # > 0: `sd` is one run's SD from the spread of this many within-pair differences
    nights: int = 0  # > 0: `sd` is one night's SD (its runs' mean) over this many nights


def band(base: np.ndarray, cand: np.ndarray, history: np.ndarray) -> Band:
    """Pooled SD: the baseline with its history as one group (the same configuration), the
    candidate's repeats as another; each group about its own mean."""
    reference = np.concatenate([base, history])
    groups = [g for g in (reference, cand) if g.size >= 2]
    df = sum(g.size - 1 for g in groups)
    if df == 0:
        return Band(None, 0, "one run: within-run only")
    ss = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    sides = f"{base.size}+{cand.size}"
    if history.size:
        source = f"history of {history.size} run{'s' * (history.size > 1)}"
        source += f" and {sides} runs" if base.size + cand.size > 2 else ""
    else:
        source = f"between {sides} runs"
    return Band(float(np.sqrt(ss / df)), df, source)


@dataclass(frozen=True)
class Spread:
    """A change of the sides' mean figures on the row's scale, and its interval's half-width."""

    change: float
    half_width: float | None  # between runs, floored by the within-run one; None: no spread
    within_sd: float | None  # the within-run bootstraps' SD of the change (None: no samples)
    band: Band
    sizes: tuple[int, int, int]  # runs: baseline, candidate, history
    z: float  # the normal quantile of the interval's level

    @property
    def within(self) -> float | None:
        """The within-run bootstraps' half-width alone."""
        return None if self.within_sd is None else self.z * self.within_sd

    @property
    def allowance(self) -> float | None:
        """The half-width with no between-run spread: GENEROUS within-run SDs. None by night:
        nights differ by more than any multiple of one run's own noise shows."""
        return None if self.within is None or self.band.nights else GENEROUS * self.within

    def run_sd(self) -> float | None:
        """One run's SD: the between-run band, else a guess from the within-run SD."""
        if self.band.sd is not None:
            return self.band.sd
        if self.within_sd is None:
            return None
        nb, nc, _ = self.sizes
        return TYPICAL * self.within_sd / np.sqrt(1 / nb + 1 / nc)


def spread(
    base: np.ndarray,
    cand: np.ndarray,
    history: np.ndarray,
    within: tuple[list[float | None], list[float | None]],
    alpha: float,
) -> Spread:
    """`within`: each run's within-run bootstrap variance of its figure (on the scale)."""
    b = band(base, cand, history)
    z = _ppf("norm", 1 - alpha / 2)
    within_sd = _within_sd(within)
    half = None
    if b.sd is not None:
        half = _t(alpha, b.df) * b.sd * np.sqrt(1 / base.size + 1 / cand.size)
        half = max(half, z * within_sd if within_sd is not None else 0.0)
    sizes = (base.size, cand.size, history.size)
    return Spread(float(cand.mean() - base.mean()), half, within_sd, b, sizes, z)


def night_spread(
    base: np.ndarray,
    cand: np.ndarray,
    history: np.ndarray,
    keys: tuple[list[str], list[str], list[str]],
    within: tuple[list[float | None], list[float | None]],
    alpha: float,
) -> Spread:
    """`spread` with the night as the unit (harness/analysis/compare/nights.py): each night's
    mean figure is one sample; the band is the pooled SD of the nights' means (the reference's
    nights, baseline and history, about their mean; the candidate's about theirs), the change
    the candidate nights' mean less the baseline nights', its half-width t(df) x SD x sqrt(1/nights
    + 1/nights), floored by the within-run one. A night in the change with fewer runs than the
    nights the spread was measured on (their harmonic mean) weighs as a noisier one
    (`nights.mean_share`): one run of tonight against nights of three is not a night's mean.
    One night a side: no spread between nights, and no allowance stands in for it."""
    kb, kc, kh = keys
    mb, mc = nights.means(base, kb), nights.means(cand, kc)
    ref = nights.means(np.concatenate([base, history]), [*kb, *kh])
    groups = [g for g in (ref, mc) if g.size >= 2]
    df = sum(g.size - 1 for g in groups)
    count, runs = ref.size + mc.size, base.size + cand.size + history.size
    z = _ppf("norm", 1 - alpha / 2)
    within_sd = _within_sd(within)
    sizes = (mb.size, mc.size, ref.size - mb.size)
    change = float(mc.mean() - mb.mean())
    if df == 0:
        b = Band(None, 0, f"one night a side ({runs} runs), no spread between nights yet", 0, count)
        return Spread(change, None, within_sd, b, sizes, z)
    sd = float(np.sqrt(sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df))
    b = Band(sd, df, f"between {ref.size}+{mc.size} nights ({runs} runs)", 0, count)
    half = _t(alpha, df) * sd * _night_scale(kb, kc, kh, mc.size >= 2)
    half = max(half, z * within_sd if within_sd is not None else 0.0)
    return Spread(change, half, within_sd, b, sizes, z)


def _night_scale(kb: list[str], kc: list[str], kh: list[str], cand_measured: bool) -> float:
    """sqrt(1/nights + 1/nights), each side's nights weighed by their runs against the typical
    night the spread was measured on (the reference's, and the candidate's where it has two)."""
    measured = [nights.counts([*kb, *kh]), *([nights.counts(kc)] if cand_measured else [])]
    typical = 1.0 / float(np.mean(1.0 / np.concatenate(measured)))
    shares = nights.mean_share(nights.counts(kb), typical)
    shares += nights.mean_share(nights.counts(kc), typical)
    return float(np.sqrt(shares))


def paired_spread(
    base: np.ndarray,
    cand: np.ndarray,
    within: tuple[list[float | None], list[float | None]],
    alpha: float,
) -> Spread:
    """`spread` of runs in pairs: base[i] and cand[i] ran back to back. The change is the mean
    within-pair difference, its half-width t(pairs - 1) x SD(differences) / sqrt(pairs), floored
    by the within-run one. The band is one run's SD, SD(differences) / sqrt(2), so it reads like
    the unpaired band. Fewer than two pairs: the unpaired rule (one run a side)."""
    if base.size != cand.size:
        raise ValueError(f"paired runs need as many a side, got {base.size} and {cand.size}")
    n = base.size
    if n < 2:
        return spread(base, cand, np.array([]), within, alpha)
    d = cand - base
    sd_d = float(d.std(ddof=1))
    b = Band(sd_d / np.sqrt(2), n - 1, f"paired over {n} pairs", pairs=n)
    z = _ppf("norm", 1 - alpha / 2)
    within_sd = _within_sd(within)
    half = _t(alpha, n - 1) * sd_d / np.sqrt(n)
    half = max(half, z * within_sd if within_sd is not None else 0.0)
    return Spread(float(d.mean()), half, within_sd, b, (n, n, 0), z)


# a regression on one covariate spends a degree of freedom: 4 left at 6. Measured too few at a
# load average of 10-19 (two A/A false alarms in 20 from a slope extrapolated at 6 pairs;
# docs/metrics.md, "Gate"): to be raised once fresh calibrations can check the new value.
MIN_ADJUSTED_PAIRS = 6


def stretch(wait_share: float) -> float:
    """How much longer CPU work takes when its threads wait `wait_share` of the time they want a
    CPU, on the log scale: log(1 / (1 - wait share)). A CPU-bound step whose thread waits half the
    time takes twice as long, log 2 further."""
    return float(-np.log1p(-min(max(wait_share, 0.0), 0.99)))


def adjusted_spread(
    base: np.ndarray,
    cand: np.ndarray,
    waits: tuple[list[float | None], list[float | None]],
    within: tuple[list[float | None], list[float | None]],
    alpha: float,
) -> Spread | None:
    """`paired_spread` corrected for contention: the within-pair differences d_i regressed on the
    difference of the two runs' `stretch` x_i (least squares, d = change + slope x); the change is
    the fitted difference at equal contention (x = 0), its half-width t(pairs - 2) x its standard
    error, floored by the within-run one. The slope is fitted, not assumed: the simulated runner
    sleeps most of a step and feels contention less than a CPU-bound one. None when it does not
    apply: fewer than `MIN_ADJUSTED_PAIRS` pairs, a wait share missing, or every pair's two runs
    equally contended (nothing to fit)."""
    n = base.size
    wb, wc = waits
    if n < MIN_ADJUSTED_PAIRS or len(wb) != n or len(wc) != n or None in [*wb, *wc]:
        return None
    x = np.array([stretch(c) - stretch(b) for b, c in zip(wb, wc, strict=True)])  # type: ignore[arg-type]
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx <= 1e-12:
        return None
    d = cand - base
    slope = float(((x - x.mean()) * (d - d.mean())).sum() / sxx)
    change = float(d.mean() - slope * x.mean())
    resid = d - (change + slope * x)
    sd_e = float(np.sqrt((resid**2).sum() / (n - 2)))
    se = sd_e * float(np.sqrt(1 / n + x.mean() ** 2 / sxx))
    b = Band(sd_e / np.sqrt(2), n - 2, f"paired over {n} pairs, corrected for CPU waits", pairs=n)
    z = _ppf("norm", 1 - alpha / 2)
    within_sd = _within_sd(within)
    half = max(_t(alpha, n - 2) * se, z * within_sd if within_sd is not None else 0.0)
    change, half = _guarded(change, float(d.mean()), half)
    return Spread(change, half, within_sd, b, (n, n, 0), z)


def _guarded(change: float, raw: float, half: float) -> tuple[float, float]:
    """The corrected change and half-width, held to the raw pairs' mean. The correction narrows
    the noise; it is not evidence by itself. Where the fitted slope turns the raw pairs' sign (a
    faster candidate slower at equal contention, or back), the interval reaches the raw mean too:
    a change the raw pairs contradict is never called. Where it moves the change further from 0
    than the raw mean (a candidate slower although it waited less: extrapolated to equal
    contention, slower still), the change is the raw mean's: the correction may explain a
    difference away, never add to one (a torch A/A gate's false alarm: raw +14.6 %, corrected
    +22.7 %, interval [+2.0 %, +47.6 %] from 6 pairs; the raw mean's interval holds 0)."""
    if change * raw < 0:
        return change, max(half, abs(change - raw))
    if abs(change) > abs(raw):
        return raw, half
    return change, half


def _t(alpha: float, df: int) -> float:
    return _ppf("t", 1 - alpha / 2, df)


def _within_sd(within: tuple[list, list]) -> float | None:
    base, cand = within
    if not base or not cand or any(v is None for v in [*base, *cand]):
        return None
    return float(np.sqrt(np.mean(base) / len(base) + np.mean(cand) / len(cand)))


def runs_needed(s: Spread, distance: float, alpha: float) -> int | None:
    """How many more runs a side would likely make the interval narrower than `distance` (the
    way from the change to the nearer decision), the spread staying what it is now."""
    if distance <= 0:
        return None
    if s.band.nights:  # by night: more nights decide it, not more runs
        return nights_needed(s, distance, alpha)
    nb, nc, nh = s.sizes
    sd = s.run_sd()
    if sd is None or sd == 0:
        return 1
    for more in range(1, MAX_MORE_RUNS + 1):
        if s.band.pairs:  # one more pair per more run a side
            n = s.band.pairs + more
            if _t(alpha, n - 1) * sd * np.sqrt(2 / n) < distance:
                return more
            continue
        b, c = nb + more, nc + more
        df = (b + nh - 1) + (c - 1)
        if _t(alpha, df) * sd * np.sqrt(1 / b + 1 / c) < distance:
            return more
    return None


def nights_needed(s: Spread, distance: float, alpha: float) -> int | None:
    """How many more earlier nights would likely make a night-against-night interval narrower
    than `distance`, the spread between nights staying what it is now (None: unknown yet, or
    more than `MAX_MORE_RUNS`)."""
    nb, nc, _ = s.sizes
    if s.band.sd is None:
        return None
    for more in range(1, MAX_MORE_RUNS + 1):
        half = _t(alpha, s.band.df + more) * s.band.sd * np.sqrt(1 / (nb + more) + 1 / nc)
        if half < distance:
            return more
    return None


def _ppf(distribution: str, q: float, *shape: float) -> float:
    """A quantile of scipy's `distribution`; scipy.stats (a second's import) only where one is
    needed, so a page that shows no comparison never imports it."""
    from scipy import stats

    return float(getattr(stats, distribution).ppf(q, *shape))
