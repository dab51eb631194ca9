"""What load the run held: tasks and requests in flight over time against the target, with the
measured window (the span every rate divides by) shaded, and the output token rate above."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.analysis.metrics import run_window
from harness.analysis.plots import WIDE, colors, plt
from harness.analysis.summary import Analysis


def load_target(manifest: dict) -> tuple[str, float] | None:
    """What the load generator aimed at: ("tasks", n) for a closed-loop replay, ("requests", n)
    for a tool run with a request-concurrency limit; None when the run says nothing."""
    replay = manifest.get("replay") or {}
    if replay.get("load") == "closed" and replay.get("concurrency"):
        return "tasks", float(replay["concurrency"])
    settings = (manifest.get("imported") or {}).get("settings") or {}
    if settings.get("max_concurrency"):
        return "requests", float(settings["max_concurrency"])
    return None


def in_flight(starts: np.ndarray, ends: np.ndarray, t0: float) -> tuple[np.ndarray, np.ndarray]:
    """Step function of how many [start, end) intervals are open, from their start/end times."""
    keep = np.isfinite(starts)
    starts, ends = starts[keep], np.where(np.isfinite(ends[keep]), ends[keep], starts[keep])
    times = np.concatenate([starts, ends]) - t0
    steps = np.concatenate([np.ones(starts.size), -np.ones(ends.size)])
    order = np.lexsort((steps, times))  # at a tie an end closes before a start opens
    return times[order], np.cumsum(steps[order])


def task_spans(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each task's first send to its last end (all phases: a task in flight is load either way)."""
    sent = records.groupby("task")["t_sent"].min()
    done = records.assign(end=records["t_done"].fillna(records["t_sent"])).groupby("task")["end"].max()
    return sent.to_numpy(dtype=float), done.to_numpy(dtype=float)


def load_held(analyses: list[Analysis], bins: int = 60) -> Figure:
    fig, (rate, held) = plt.subplots(2, 1, figsize=(WIDE, 5.2), dpi=100, sharex=True, layout="constrained",
                                     height_ratios=(1, 1.6))
    rate.set_title("Load held: tasks (solid) and requests (thin) in flight vs target (dotted); "
                   "shaded = measured window", loc="left", fontsize="medium")
    for a, color in zip(analyses, colors(analyses), strict=False):
        recs = a.run.records
        if recs["t_sent"].notna().sum() == 0:
            continue
        t0 = float(recs["t_sent"].min())
        start, end = run_window(a.run.ok)
        if end > start:
            held.axvspan(start - t0, end - t0, color=color, alpha=0.08)
            rate.axvspan(start - t0, end - t0, color=color, alpha=0.08)
        _rate(rate, a, t0, color, bins)
        held.step(*in_flight(*task_spans(recs), t0), where="post", color=color, lw=1.6, label=f"{a.run.name} tasks")
        held.step(*in_flight(recs["t_sent"].to_numpy(dtype=float), recs["t_done"].to_numpy(dtype=float), t0),
                  where="post", color=color, lw=0.7, alpha=0.8, label=f"{a.run.name} requests")
        target = load_target(a.run.manifest)
        if target:
            held.axhline(target[1], color=color, ls=":", lw=1.4, label=f"{a.run.name} target {target[1]:g} {target[0]}")
    rate.set_ylabel("output tok/s")
    held.set_ylabel("in flight")
    held.set_xlabel("seconds since the run's first send")
    if held.get_legend_handles_labels()[0]:
        held.legend(loc="upper right", fontsize="small", ncol=2)
    return fig


def _rate(ax, a: Analysis, t0: float, color, bins: int) -> None:
    ok = a.run.ok
    if ok.empty:
        return
    done = ok["t_done"].to_numpy(dtype=float) - t0
    width = max(done.max(), 1e-9) / bins
    tokens = np.nan_to_num(a.per_request["completion_tokens"].to_numpy(dtype=float))
    per_bin = np.bincount(np.minimum((done / width).astype(int), bins - 1), weights=tokens, minlength=bins) / width
    ax.step(np.arange(bins) * width, per_bin, where="post", color=color, label=a.run.name)
