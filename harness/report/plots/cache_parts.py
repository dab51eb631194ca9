"""The report's figures of the cache by prompt segment and by call kind: server hit rate (bar)
beside the ideal (tick), runs in their colours (summary.json `cache.by_segment`, `by_call_kind`)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.analysis.summary_types import Analysis
from harness.report.cache_parts import CALL_LABELS, SEGMENT_LABELS
from harness.report.colors import IDEAL
from harness.report.plots.base import colors, figure, legend_below, no_data, run_handles


def has_parts(analyses: list[Analysis]) -> bool:
    return any(a.summary["cache"].get("by_call_kind") for a in analyses)


PANELS: dict[str, tuple[dict, str]] = {
    "by_segment": (SEGMENT_LABELS, "prompt segment"),
    "by_call_kind": (CALL_LABELS, "call kind"),
}


def cache_parts(analyses: list[Analysis], key: Literal["by_segment", "by_call_kind"]) -> Figure:
    """One of the two: by prompt segment or by call kind, half a page wide (the two sit side by
    side on a wide page, one above the other on a narrow one: no second drawing for either)."""
    names, title = PANELS[key]
    labels, server, ideal, run_of = _bars(analyses, key, names)
    fig, ax = figure(
        f"Hit rate by {title} (bar: server; tick: ideal), over the requests whose server"
        " reported cached tokens",
        height=max(3.6, 1.2 + 0.3 * len(labels)),
    )
    palette = colors(analyses)
    y = np.arange(len(labels))
    ax.barh(y, np.nan_to_num(server), color=[palette[i] for i in run_of], height=0.6)
    ax.scatter(np.nan_to_num(ideal), y, marker="|", s=300, color=IDEAL, zorder=3)
    ax.set_yticks(y, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, 1.02)
    ax.set_xlabel(f"hit rate, by {title}")
    if not labels:
        no_data(ax, "not known for this run")
    handles, runs = run_handles(analyses)
    tick = Line2D([], [], color=IDEAL, marker="|", ms=12, ls="none")
    legend_below(fig, [*handles, tick], [*runs, "ideal (infinite cache)"])
    return fig


def _bars(
    analyses: list[Analysis], key: Literal["by_segment", "by_call_kind"], names: dict
) -> tuple[list, list, list, list]:
    labels, server, ideal, run_of = [], [], [], []
    for i, a in enumerate(analyses):
        for kind, v in (a.summary["cache"].get(key) or {}).items():
            for name, row in [(names.get(kind, kind), v), *_modes(v)]:
                labels.append(f"{name} ({row['requests']})")
                server.append(np.nan if row["hit_rate"] is None else row["hit_rate"])
                ideal.append(np.nan if row["ideal_hit_rate"] is None else row["ideal_hit_rate"])
                run_of.append(i)
    return labels, server, ideal, run_of


def _modes(v: dict) -> list[tuple[str, dict]]:
    return [(f"subagent first, {mode}ed", m) for mode, m in (v.get("modes") or {}).items()]
