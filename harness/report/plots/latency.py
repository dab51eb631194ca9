"""Where the time went: a latency's empirical CDF (TTFT, TPOT, E2EL) and the interactivity of
each request, on log axes limited to where the data is (the share left out said under the axis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.analysis.summary_types import Analysis
from harness.report.numbers import fmt, human
from harness.report.plots.axes import label_with_note, log_span, log_x
from harness.report.plots.base import (
    colors,
    figure,
    legend_below,
    no_data,
    run_handles,
    style_handles,
    thin,
)

PERCENTILES = ((0.5, "p50", ":"), (0.9, "p90", "--"), (0.99, "p99", "-."))
CDF_TAIL, CDF_KEEP = (0.01, 0.999), (0.1, 0.99)  # a CDF keeps the percentiles it marks in view
HIST_BINS = 40


def _values(a: Analysis, column: str) -> np.ndarray:
    v = a.per_request[column].to_numpy(dtype=float)
    return v[np.isfinite(v)]


def latency_cdf(analyses: list[Analysis], column: str, label: str) -> Figure:
    """The share of requests at or under each time; each run's p50, p90 and p99 marked."""
    fig, ax = figure(f"{label}: cumulative distribution (log axis)")
    pooled = np.concatenate([_values(a, column) for a in analyses]) if analyses else np.array([])
    span = log_span(pooled, CDF_TAIL, CDF_KEEP)
    if span is None:
        no_data(ax)
        return fig
    for a, color in zip(analyses, colors(analyses), strict=False):
        v = np.sort(thin(_values(a, column)))
        v = v[v > 0]
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", color=color)
            _mark_percentiles(
                ax, cast(Mapping, a.summary)[f"{column}_s"], color, named=len(analyses) == 1
            )
    log_x(ax, span)
    for q, _, style in PERCENTILES:
        ax.axhline(q, color="grey", lw=0.6, ls=style)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 0.9, 0.99], ["0", "0.25", "0.5", "0.75", "0.9", "0.99"])
    ax.set_ylim(0, 1.02)
    label_with_note(ax, f"{label} (s, log scale)", span)
    ax.set_ylabel("fraction of requests")
    handles, labels = run_handles(analyses)
    if handles:
        more, names = style_handles([("percentile (dot)", {"marker": "o", "ls": "none"})])
        legend_below(fig, [*handles, *more], [*labels, *names])
    return fig


def _mark_percentiles(ax: Axes, figures: Mapping, color: str, named: bool) -> None:
    """A dot where the curve crosses each percentile, at the analysis's figure (summary.json's,
    the tables' own); with one run, its value beside it (with several, the strip and the tables
    give them)."""
    for q, name, _ in PERCENTILES:
        if figures.get(name) is None:
            continue
        x = float(figures[name])
        ax.plot([x], [q], marker="o", color=color, ms=5, ls="none")
        if named:
            ax.annotate(
                f"{name} {fmt(x, '.3g')} s",
                (x, q),
                textcoords="offset points",
                xytext=(6, -12),
                fontsize="x-small",
                color=color,
            )


def interactivity(analyses: list[Analysis]) -> Figure:
    """Each request's 1 / TPOT as a density on log-spaced bins, each run's P90 interactivity
    dashed; the axis spans the middle 98 % of requests when a tail reaches far past it."""
    fig, ax = figure("Interactivity per request (1 / TPOT), log axis")
    values = [thin(_values(a, "interactivity")) for a in analyses]
    pooled = np.concatenate(values) if values else np.array([])
    span = log_span(pooled)
    if span is None:
        no_data(ax)
        return fig
    bins = np.logspace(np.log10(span.lo) - 0.05, np.log10(span.hi) + 0.05, HIST_BINS)
    for v, a, color in zip(values, analyses, colors(analyses), strict=False):
        _density_steps(ax, v[(v >= bins[0]) & (v <= bins[-1])], bins, color)
        p90 = a.summary["interactivity_p90"]
        if p90:
            ax.axvline(p90, color=color, ls="--", lw=1.2)
    log_x(ax, span)
    label_with_note(ax, "tok/s/user (log scale)", span)
    ax.set_ylabel("density")
    handles, labels = run_handles(analyses)
    key = "dashed: P90 interactivity = 1 / p90(TPOT)"
    if len(analyses) == 1 and analyses[0].summary["interactivity_p90"]:
        key = f"dashed: P90 interactivity {human(analyses[0].summary['interactivity_p90'])} tok/s/user"
    color = colors(analyses)[0] if len(analyses) == 1 else "dimgrey"
    legend_below(fig, [*handles, Line2D([], [], color=color, ls="--")], [*labels, key])
    return fig


def _density_steps(ax: Axes, values: np.ndarray, bins: np.ndarray, color: str) -> None:
    """A run's histogram as a density drawn in steps (each run its own area, so runs of other
    sizes compare), as seaborn's `histplot(element="step", stat="density")` draws it."""
    if not values.size:
        return
    density, edges = np.histogram(values, bins=bins, density=True)
    heights = np.append(density, density[-1])
    area = ax.fill_between(
        edges, heights, step="post", facecolor=to_rgba(color, 0.25), edgecolor=color
    )
    area.sticky_edges.y[:] = [0]  # the density axis starts at 0, with no margin below
