"""Cache hits by tier: one bar per run, its hit rate split by where the KV came from."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.analysis.summary_types import Analysis
from harness.report.colors import IDEAL, tier_color
from harness.report.plots.base import HALF, figure, legend_below, short

TIERS = ("device", "cpu", "disk", "remote")


def _rates(a: Analysis) -> dict[str, float]:
    return ((a.summary["cache"].get("tiers") or {}).get("hit_rate")) or {}


def has_tiers(analyses: list[Analysis]) -> bool:
    """Whether any run's summary splits its hits by tier (else the figure is left out)."""
    return any(_rates(a) for a in analyses)


def tiers_used(analyses: list[Analysis]) -> list[str]:
    """The tiers some run served hits from; with one, a sentence says it instead of a figure."""
    return [t for t in TIERS if any(_rates(a).get(t) for a in analyses)]


def cache_tiers(analyses: list[Analysis]) -> Figure:
    """Each run's hit rate (requests that report a split) stacked by tier, the ideal marked."""
    fig, ax = figure("Cache hits by tier (where the cached KV came from)", width=HALF)
    names = [short(a.run.name) for a in analyses]
    left = np.zeros(len(analyses))
    for tier in TIERS:
        rates = [_rates(a).get(tier) or 0.0 for a in analyses]
        ax.barh(names, rates, left=left, color=tier_color(tier), label=f"hit: {tier}", height=0.5)
        left += np.asarray(rates)
    ideal = [a.summary.get("ideal_cache_hit_rate") for a in analyses]
    for y, value in enumerate(ideal):
        if value is not None:
            ax.plot([value, value], [y - 0.3, y + 0.3], color=IDEAL, lw=1.5)
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("hit rate, by the tier the hit came from")
    ax.invert_yaxis()
    handles, labels = ax.get_legend_handles_labels()
    legend_below(fig, [*handles, Line2D([], [], color=IDEAL, lw=1.5)], [*labels, "ideal"])
    return fig
