"""TPGS against P90 interactivity, each run a point in its colour, the runs on the Pareto frontier
ringed and joined (analysis/frontier.py's `RunsFrontier`: computed there, drawn here)."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.analysis.frontier import RunsFrontier
from harness.analysis.summary_types import Analysis
from harness.report.plots.axes import StepFormatter
from harness.report.plots.base import colors, figure, figure_title, legend_below, run_handles

RING: dict[str, Any] = {
    "marker": "o",
    "s": 190,
    "facecolors": "none",
    "edgecolors": "black",
    "lw": 1.2,
}


def pareto(analyses: list[Analysis], frontier: RunsFrontier) -> Figure:
    fig, ax = figure("TPGS vs P90 interactivity: each run a point; ringed: the Pareto frontier")
    colour = dict(zip((a.run.name for a in analyses), colors(analyses), strict=False))
    for name, x, y in frontier.points:
        ax.scatter([x], [y], color=colour[name], s=60, zorder=3)
    ringed = [frontier.points[i] for i in frontier.on_frontier]
    if ringed:
        ax.scatter([p[1] for p in ringed], [p[2] for p in ringed], zorder=4, **RING)
    if len(ringed) > 1:
        ax.plot([p[1] for p in ringed], [p[2] for p in ringed], color="dimgrey", lw=1, zorder=2)
    if frontier.why_not:
        figure_title(fig, f"TPGS vs P90 interactivity (no frontier: {frontier.why_not})")
    ax.margins(0.2)
    ax.xaxis.set_major_formatter(StepFormatter())
    ax.yaxis.set_major_formatter(StepFormatter())
    ax.set_xlabel("P90 interactivity (tok/s/user)")
    ax.set_ylabel("TPGS (tok/s/GPU)")
    handles, labels = run_handles(analyses)
    if ringed:
        handles.append(Line2D([], [], color="black", marker="o", ms=11, mfc="none", ls="none"))
        labels.append(_frontier_key(len(ringed), len(frontier.points)))
    legend_below(fig, handles, labels)
    return fig


def _frontier_key(on: int, runs: int) -> str:
    if on == runs:
        return "ringed: the frontier, every run (none does better on both axes than another)"
    rest = "the other does" if runs - on == 1 else f"the other {runs - on} do"
    return f"ringed: the frontier, {on} of {runs} runs ({rest} no better on either axis)"
