"""History screened before it serves as the noise model: which past runs count, and why not.

A past run counts when it replayed the same trace under the same load against the same target
configuration as the baseline, ended cleanly, and its host was not busy (the gate's own screen,
`harness.analysis.host_state.busy_reason`: others' load, stolen time, a self-check that warned and
blamed the host).
A run left out is listed with its reason. Among the runs that pass, one whose figure on a gated
metric sits far from the others (a robust z above `OUTLIER_Z`, from the median and the MAD of the
baseline and history runs) was itself a regression or a disturbed night: it is left out too, so
one starved night in the history cannot widen the band enough to hide the next one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from harness.analysis.compare.changes import Figures, within_var
from harness.analysis.compare.comparable import not_comparable
from harness.analysis.compare.noise import on_scale
from harness.analysis.compare.sides import HEADLINE, Side
from harness.analysis.ending import run_ending
from harness.analysis.host_state import busy_reason
from harness.analysis.summary_types import Analysis

OUTLIER_Z = 3.5  # robust z (|x - median| / (1.4826 MAD)) past which a history run is left out
OUTLIER_MIN_RUNS = 4  # baseline + history runs needed before anything is called an outlier
MAD_SD = 1.4826  # the MAD of a normal sample times this is its SD
_VOLATILE = ("url", "port", "pid", "address", "host")  # differ run to run, not configuration


@dataclass
class Screened:
    kept: list[Analysis]
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (run, why)


def screen(
    history: Iterable[Analysis], baseline: list[Analysis], flagged: Iterable[str] = ()
) -> Screened:
    """The history runs that may serve as noise for `baseline` (`flagged`: run paths already
    judged regressed, e.g. by the trend)."""
    flagged = set(flagged)
    out = Screened([])
    config = target_config(baseline[0]) if baseline else {}
    for a in history:
        why = _why_not(a, baseline, config, flagged)
        if why is None:
            out.kept.append(a)
        else:
            out.left_out.append((a.run.name, why))
    return out


def _why_not(a: Analysis, baseline: list[Analysis], config: dict, flagged: set) -> str | None:
    if str(a.run.path.resolve()) in flagged:
        return "itself judged regressed"
    reasons = not_comparable(baseline, [a])
    if reasons:
        return next(iter(reasons.values())) if len(set(reasons.values())) == 1 else "not alike"
    diff = config_diff(config, target_config(a))
    if diff:
        return f"another target configuration ({diff})"
    ending = run_ending(a.run.manifest)
    if ending or a.run.manifest.get("status") not in (None, "complete"):
        return f"ended badly: {ending or a.run.manifest.get('status')}"
    return busy_reason(a.summary)


def target_config(a: Analysis) -> dict:
    """The manifest's target, flattened, less what changes from run to run (ports, pids)."""
    flat: dict = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif not any(word in prefix.rsplit(".", 1)[-1] for word in _VOLATILE):
            flat[prefix] = value

    walk("", a.run.manifest.get("target") or {})
    return flat


def config_diff(a: dict, b: dict) -> str:
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    shown = ", ".join(f"{k} {b.get(k)} vs {a.get(k)}" for k in keys[:3])
    return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def outliers(reference: np.ndarray, history: np.ndarray, floor: float) -> list[tuple[int, float]]:
    """Indices into `history` (with their robust z) of runs far from the reference (the
    baseline's and the history's figures on the metric's scale). `floor`: the smallest SD
    allowed (the within-run SD), so a tight cluster does not make an ordinary run look far."""
    values = np.concatenate([reference, history])
    if values.size < OUTLIER_MIN_RUNS:
        return []
    median = float(np.median(values))
    scale = max(MAD_SD * float(np.median(np.abs(values - median))), floor)
    if scale <= 0:
        return []
    z = np.abs(history - median) / scale
    return [(int(i), float(z[i])) for i in np.flatnonzero(z > OUTLIER_Z)]


def drop_outliers(screened: Screened, base: dict[str, Figures], gated: set[str]) -> list[Analysis]:
    """The screened history less the runs far from the rest on a gated metric (listed with
    the metric and its robust z); `base`: the baseline's figures by metric key."""
    kept = list(screened.kept)
    far: dict[int, str] = {}
    for m in HEADLINE:
        if m.key not in gated or m.server_wide:
            continue
        values = [m.value(Side([a])) for a in kept]
        idx = [i for i, v in enumerate(values) if v is not None]
        ref = base[m.key].values
        x, scale = on_scale([*ref, *(v for v in values if v is not None)], m.scale)
        for j, z in outliers(x[: len(ref)], x[len(ref) :], _within_sd(base[m.key], scale)):
            why = (
                f"an outlier among the past runs ({m.label} {values[idx[j]]:.4g}, robust z {z:.1f})"
            )
            far.setdefault(idx[j], why + ": itself a regression or a disturbed run")
    for i in sorted(far, reverse=True):
        screened.left_out.append((kept.pop(i).run.name, far[i]))
    screened.kept = kept
    return kept


def _within_sd(f: Figures, scale: str) -> float:
    var = [v for r in f.replicates if (v := within_var(r, scale)) is not None]
    return float(np.sqrt(np.mean(var))) if var else 0.0
