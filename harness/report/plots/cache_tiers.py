"""Cache hits by tier: one bar per run, its hit rate split by where the KV came from."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from harness.analysis.summary import Analysis
from harness.report.plots.base import HALF, _figure

TIERS = ("device", "cpu", "disk", "remote")
_COLORS = ("tab:green", "tab:blue", "tab:orange", "tab:purple")


def has_tiers(analyses: list[Analysis]) -> bool:
    """Whether any run's summary splits its hits by tier (else the figure is left out)."""
    return any((a.summary["cache"].get("tiers") or {}).get("hit_rate") for a in analyses)


def cache_tiers(analyses: list[Analysis]) -> Figure:
    """Each run's hit rate (requests that report a split) stacked by tier, the ideal marked."""
    fig, ax = _figure("Cache hits by tier (where the cached KV came from)", width=HALF)
    names = [a.run.name for a in analyses]
    left = np.zeros(len(analyses))
    for tier, color in zip(TIERS, _COLORS, strict=True):
        rates = [
            ((a.summary["cache"].get("tiers") or {}).get("hit_rate") or {}).get(tier) or 0.0
            for a in analyses
        ]
        ax.barh(names, rates, left=left, color=color, label=tier, height=0.5)
        left += np.asarray(rates)
    ideal = [a.summary.get("ideal_cache_hit_rate") for a in analyses]
    for y, value in enumerate(ideal):
        if value is not None:
            ax.plot([value, value], [y - 0.3, y + 0.3], color="black", lw=1.5)
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("hit rate by tier (black: ideal)")
    ax.invert_yaxis()
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize="small", frameon=False
    )
    return fig
