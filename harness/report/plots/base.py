"""What every figure of the report shares: its size (the width of its column on the page), its
title, the runs' colours and names, and legends under the axes, never over the data.

Figures are plain matplotlib Figures drawn by the Agg canvas (no pyplot), laid out by matplotlib's
constrained layout. Several runs share one figure, each in its colour (report/colors.py: the same
colour for a run in every figure of a page). Distributions are drawn from at most `MAX_POINTS`
requests per run (an evenly spaced subsample), so a million-record run still plots in seconds;
the numbers in the tables always come from the full data.
"""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.analysis.summary_types import Analysis
from harness.report.colors import run_colors
from harness.report.plots import style

MAX_POINTS = 20_000
TITLE_PT = 12  # the figure title's size, for wrapping it inside the figure
# inches at 100 dpi, the width of a figure's column on a 1400 px page (html.CSS: 1368 px of
# content, two 678 px columns), so a figure is drawn at the size it is shown
WIDE = 13.6
HALF = 6.75
LEGEND_PT = 9.0
style.apply()


def figure(title: str, width: float = HALF, height: float = 3.6) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    ax = fig.subplots()
    figure_title(fig, title)
    return fig, ax


def figure_title(fig: Figure, title: str) -> None:
    """The title at the figure's left edge, wrapped to its width: an axes title starts where the
    axes do, so long tick labels (run names, endpoint URLs) pushed it past the right edge."""
    chars = max(20, int(fig.get_figwidth() * 72 / (TITLE_PT * 0.56)))
    fig.suptitle("\n".join(textwrap.wrap(title, chars)), x=0.01, ha="left", fontsize=TITLE_PT)


def short(name: str, limit: int = 24) -> str:
    """A label cut to `limit` characters, keeping its end (where run and endpoint names differ);
    the page names the whole run elsewhere."""
    return name if len(name) <= limit else "…" + name[-(limit - 1) :]


def colors(analyses: list[Analysis]) -> list[str]:
    """Each run's colour, in the page's order of runs."""
    return run_colors(len(analyses))


def run_handles(analyses: list[Analysis]) -> tuple[list, list[str]]:
    """A legend entry per run (its colour, its name once); none for a single run, which the page
    names already."""
    if len(analyses) < 2:
        return [], []
    handles = [Line2D([], [], color=c, lw=2.5) for c in colors(analyses)]
    return handles, [short(a.run.name, 36) for a in analyses]


def style_handles(styles: list[tuple[str, dict]]) -> tuple[list, list[str]]:
    """Legend entries for line styles, drawn in grey: each style once, whatever the runs."""
    return [Line2D([], [], color="dimgrey", **kw) for _, kw in styles], [s for s, _ in styles]


def legend_below(fig: Figure, handles: list, labels: list[str]) -> None:
    """A legend under the axes (constrained layout makes room for it), as many columns as fit
    the figure's width: outside the data, and never cut at the figure's edge."""
    if not handles:
        return
    widest = max(len(label) for label in labels) * LEGEND_PT * 0.58 + 32  # text, handle, gap
    ncol = max(1, min(len(labels), int(fig.get_figwidth() * 72 * 0.96 // widest)))
    fig.legend(
        handles, labels, loc="outside lower center", ncol=ncol, fontsize=LEGEND_PT, frameon=False
    )


def no_data(ax: Axes, text: str = "no ok requests to plot") -> None:
    ax.text(0.5, 0.5, text, ha="center", transform=ax.transAxes)


def thin(values: np.ndarray) -> np.ndarray:
    """The finite values, evenly subsampled to at most MAX_POINTS."""
    v = values[np.isfinite(values)]
    return v[:: max(1, v.size // MAX_POINTS)] if v.size > MAX_POINTS else v
