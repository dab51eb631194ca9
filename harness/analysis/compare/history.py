"""Runs screened before they serve as evidence: which past runs count as history, which runs of a
side count, and why not.

A past run counts when it replayed the same trace under the same load against the same target
configuration as the baseline, ended cleanly, and its host was not busy (the gate's own screen,
`harness.analysis.host_state.busy_reason`: others' load, stolen time, a self-check that warned and
blamed the host).
A run left out is listed with its reason; one left out for being another configuration is
*unlike* (no rerun makes it evidence), the others *disturbed*. Among the runs that pass, one
whose figure on a gated metric sits far from the others (a robust z above `OUTLIER_Z`, from the
median and the MAD of the baseline and history runs) was itself a regression or a disturbed
night: it is left out too, so one starved night in the history cannot widen the band enough to
hide the next one. `screen_side` applies the same screen to a side's own runs (`harness
compare` with several runs a side), outliers among the side's runs included.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from harness.analysis.compare.changes import Figures, figures, within_var
from harness.analysis.compare.comparable import not_comparable
from harness.analysis.compare.nights import night_of
from harness.analysis.compare.noise import on_scale
from harness.analysis.compare.settings import differences, target_config
from harness.analysis.compare.sides import HEADLINE, Side
from harness.analysis.ending import run_ending
from harness.analysis.host_state import Screen, busy_reason
from harness.analysis.summary_types import Analysis

OUTLIER_Z = 3.5  # robust z (|x - median| / (1.4826 MAD)) past which a history run is left out
OUTLIER_MIN_RUNS = 4  # baseline + history runs needed before anything is called an outlier
MAD_SD = 1.4826  # the MAD of a normal sample times this is its SD


@dataclass
class Screened:
    kept: list[Analysis]
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (run, why)
    unlike: list[tuple[str, str]] = field(default_factory=list)  # of left_out: another config

    @property
    def all_unlike(self) -> bool:
        """Nothing kept, and every run left out was another configuration: no rerun helps."""
        return not self.kept and bool(self.unlike) and len(self.unlike) == len(self.left_out)


def screen(
    history: Iterable[Analysis],
    baseline: list[Analysis],
    flagged: Iterable[str] = (),
    *,
    as_baseline: bool = False,
    host: Screen | None = None,
) -> Screened:
    """The history runs that may serve as noise for `baseline` (`flagged`: run paths already
    judged regressed, e.g. by the trend). `as_baseline`: the history is the baseline and
    `baseline` the run judged against it (a gate's history mode), so a reason names each
    history run first. `host`: the host screen's limits (a gate's own; default the screen's)."""
    flagged = set(flagged)
    out = Screened([])
    config = target_config(baseline[0]) if baseline else {}
    for a in history:
        if str(a.run.path.resolve()) in flagged:
            out.left_out.append((a.run.name, "itself judged regressed"))
        elif (why := unlike_reason(a, baseline, config, as_baseline)) is not None:
            out.left_out.append((a.run.name, why))
            out.unlike.append((a.run.name, why))
        elif (why := disturbed_reason(a, host)) is not None:
            out.left_out.append((a.run.name, why))
        else:
            out.kept.append(a)
    return out


def unlike_reason(
    a: Analysis, reference: list[Analysis], config: dict, as_baseline: bool = False
) -> str | None:
    """Why `a` is not a run of the reference's configuration (trace, load, target), or None;
    the baseline's values first (`as_baseline`: `a` is the baseline, the reference the run)."""
    reasons = not_comparable([a], reference) if as_baseline else not_comparable(reference, [a])
    if reasons:
        return next(iter(reasons.values())) if len(set(reasons.values())) == 1 else "not alike"
    theirs = target_config(a)
    diff = differences(theirs, config) if as_baseline else differences(config, theirs)
    who = "this run vs the run judged" if as_baseline else "baseline vs this run"
    return f"another target configuration, {who}: {diff}" if diff else None


def disturbed_reason(a: Analysis, host: Screen | None = None) -> str | None:
    """Why `a` is no evidence although of the configuration: it ended badly, its host was busy
    (by `host`'s limits, else the screen's own)."""
    ending = run_ending(a.run.manifest)
    if ending or a.run.manifest.get("status") not in (None, "complete"):
        return f"ended badly: {ending or a.run.manifest.get('status')}"
    return (host or Screen()).why(a.summary)


def screen_side(
    side: list[Analysis], base: dict[str, Figures], gated: set[str], ended: bool = True
) -> Screened:
    """The runs of one side that may serve as its evidence: those that ended cleanly (unless
    `ended` is False: the user asked to judge unclosed runs) on a host that was not busy, less
    outliers among them on a gated metric. `base`: the side's figures by metric key."""
    out = Screened([])
    for a in side:
        why = disturbed_reason(a) if ended else busy_reason(a.summary)
        if why is None:
            out.kept.append(a)
        else:
            out.left_out.append((a.run.name, why))
    drop_outliers(out, base, gated, reference=False)
    return out


def outliers(
    reference: np.ndarray, history: np.ndarray, floor: float, keys: list[str] | None = None
) -> list[tuple[int, float]]:
    """Indices into `history` (with their robust z) of runs far from the reference (the
    baseline's and the history's figures on the metric's scale). `floor`: the smallest SD
    allowed (the within-run SD), so a tight cluster does not make an ordinary run look far.
    `keys`: each value's night (`nights.night_of`), reference first. Runs of several nights,
    some night holding more than one, are not screened: a night's runs agree more than nights
    do, so a night off by its ordinary night effect looks far from the median of tight runs,
    and leaving it out narrows the spread between nights the verdict stands on (A/A nights
    simulated, `benchmarks/night_aa.py --screen`, five earlier nights: a row's false alarms 0.026
    unscreened, 0.050 screened by run, 0.061 by the nights' means, at a nominal 0.025; the gate
    screens no history for outliers either)."""
    values = np.concatenate([reference, history])
    if values.size < OUTLIER_MIN_RUNS or (keys is not None and 1 < len(set(keys)) < len(keys)):
        return []
    median = float(np.median(values))
    scale = max(MAD_SD * float(np.median(np.abs(values - median))), floor)
    if scale <= 0:
        return []
    z = np.abs(history - median) / scale
    return [(int(i), float(z[i])) for i in np.flatnonzero(z > OUTLIER_Z)]


def drop_outliers(
    screened: Screened, base: dict[str, Figures], gated: set[str], reference: bool = True
) -> list[Analysis]:
    """The screened runs less those far from the rest on a gated metric (listed with the metric
    and its robust z); `base`: the baseline's figures by metric key, the reference the history
    is judged beside (`reference` False: the screened runs are a side, judged among themselves,
    with `base` giving only the within-run floor)."""
    kept = list(screened.kept)
    far: dict[int, str] = {}
    for m in HEADLINE:
        if m.key not in gated or m.server_wide:
            continue
        values = [m.value(Side([a])) for a in kept]
        idx = [i for i, v in enumerate(values) if v is not None]
        ref = base[m.key].values if reference else []
        x, scale = on_scale([*ref, *(v for v in values if v is not None)], m.scale)
        among, what = (
            ("past runs", "itself a regression or a disturbed run")
            if reference
            else ("runs of its side", "a disturbed run")
        )
        keys = [*(base[m.key].nights if reference else []), *(night_of(kept[i]) for i in idx)]
        floor = _within_sd(base[m.key], scale)
        for j, z in outliers(x[: len(ref)], x[len(ref) :], floor, keys):
            why = f"an outlier among the {among} ({m.label} {values[idx[j]]:.4g}, robust z {z:.1f})"
            far.setdefault(idx[j], f"{why}: {what}")
    for i in sorted(far, reverse=True):
        screened.left_out.append((kept.pop(i).run.name, far[i]))
    screened.kept = kept
    return kept


def _within_sd(f: Figures, scale: str) -> float:
    var = [v for r in f.replicates if (v := within_var(r, scale)) is not None]
    return float(np.sqrt(np.mean(var))) if var else 0.0


@dataclass
class Sides:
    """The runs each side is judged on, and those of its runs the screen left out."""

    baseline: list[Analysis]
    candidate: list[Analysis]
    left_out: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # side -> (run, why)
    empty: str | None = None  # a side with no usable run: judged on all its runs, inconclusive


def screen_sides(
    baseline: list[Analysis], candidate: list[Analysis], gated: set[str], rng, ended: bool
) -> Sides:
    """Each side less its busy, badly ended and outlying runs. A side left with no usable run
    keeps all of them (the rows still show what they measured) and the verdict is inconclusive.
    `rng`: the within-run bootstraps' generator (evidence.rng)."""
    out = Sides([], [])
    for name, side in (("baseline", baseline), ("run", candidate)):
        figs = {m.key: figures(m, side, rng) for m in HEADLINE}
        s = screen_side(side, figs, gated, ended=ended)
        out.left_out[name] = s.left_out
        if not s.kept and side:
            out.empty = out.empty or name
        kept = s.kept or side
        out.baseline, out.candidate = (
            (kept, out.candidate) if name == "baseline" else (out.baseline, kept)
        )
    return out
