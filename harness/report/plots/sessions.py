"""A task's swim lanes: one lane per session, a bar per request in the run's colour (solid on the
critical path, lighter off it), arrows for spawns (parent -> subagent) and joins (subagent ->
parent); the legend names only what is drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from harness.analysis.summary_types import Analysis
from harness.report.numbers import fmt
from harness.report.plots.base import WIDE, figure, legend_below, no_data, short

MAX_LANES = 24
# how strongly each kind of request shows its run's colour
SHADES = {"critical path": 1.0, "main session, off the path": 0.45, "subagent, off the path": 0.2}


def session_timeline(a: Analysis, color: str) -> Figure:
    """The swim lanes of the task `timeline_task` picks, in the run's `color`."""
    task, why = timeline_task(a.tasks)
    title = f"Session timeline (swim lanes) of task {task}: {why}" if task else why
    fig, ax = figure(title, width=WIDE, height=4.2)
    if task is None:
        no_data(ax, "no complete task")
        return fig
    recs = a.graph.recs[a.graph.recs["task"] == task]
    order = list(dict.fromkeys(recs.sort_values("t_sent")["session_id"]))[:MAX_LANES]
    lanes = {sid: i for i, sid in enumerate(order)}
    critical = set(a.graph.critical_path(task))
    bars = [
        (lanes[r.session_id], r.t_sent, r.t_done, _kind(r, critical), r.request_id)
        for r in recs.itertuples(index=False)
        if r.session_id in lanes
    ]
    drawn = _draw_bars(ax, bars, color)
    where = {rid: (start, end, lane) for lane, start, end, _, rid in bars}
    for src, dst in a.graph.links(task):
        if src in where and dst in where:
            ax.annotate(
                "",
                xy=(where[dst][0], where[dst][2]),
                xytext=(where[src][1], where[src][2]),
                arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.8},
            )
    ax.set_yticks(list(lanes.values()), [short(str(sid), 32) for sid in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("run clock (s)")
    kinds = [k for k in SHADES if k in drawn]
    legend_below(fig, [Patch(color=_shade(color, k)) for k in kinds], kinds)
    return fig


def _kind(r, critical: set) -> str:
    if r.request_id in critical:
        return "critical path"
    return "main session, off the path" if r.agent == "main" else "subagent, off the path"


def _shade(color: str, kind: str) -> tuple[float, float, float, float]:
    return to_rgba(color, SHADES[kind])


def _draw_bars(ax, bars: list, color: str) -> set[str]:
    """One `barh` for every request (a call per bar would cost a few ms each); the kinds drawn."""
    if not bars:
        return set()
    lane, start, end, kind, _ = (list(column) for column in zip(*bars, strict=True))
    shades = [_shade(color, k) for k in kind]
    ax.barh(lane, np.subtract(end, start), left=start, height=0.5, color=shades, lw=0)
    return set(kind)


def timeline_task(tasks: pd.DataFrame) -> tuple[str | None, str]:
    """The task a swim lane shows, and why that one: the longest complete task that has subagent
    sessions (the structure is what a lane shows), else the longest complete task."""
    done = tasks[tasks["complete"]].sort_values("completion_s", ascending=False)
    if done.empty:
        return None, "no complete task"
    forked = done[done["sessions"] > 1]
    if not forked.empty:
        t = forked.iloc[0]
        return str(t["task"]), (
            f"the longest complete task with subagents ({int(t['sessions'])} sessions,"
            f" {fmt(t['completion_s'], '.3g')} s)"
        )
    return str(done.iloc[0]["task"]), "the longest complete task (no task had subagents)"
