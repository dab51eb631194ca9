"""The report's cache figures: server hit rate beside the ideal, by turn and by group, and where
the missed prompt tokens went (one bar per run, split by the miss categories summary.json has)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.analysis.cache import group_label
from harness.analysis.summary_types import Analysis
from harness.report.colors import IDEAL, outcome_color
from harness.report.misses import label
from harness.report.plots.base import (
    HALF,
    colors,
    figure,
    legend_below,
    no_data,
    run_handles,
    short,
    style_handles,
)


def cache_by_turn(analyses: list[Analysis]) -> Figure:
    fig, ax = figure("Prefix-cache hit rate by turn index: server (solid) vs ideal (dashed)")
    for a, color in zip(analyses, colors(analyses), strict=False):
        table = a.tables["turn"]
        ax.plot(table.index, table["hit_rate"], marker="o", ms=3, color=color)
        ax.plot(table.index, table["ideal_hit_rate"], ls="--", color=color)
    ax.set_xlabel("turn index")
    ax.set_ylabel("hit rate")
    ax.set_ylim(0, 1.02)
    handles, labels = run_handles(analyses)
    more, names = style_handles([("server", {"marker": "o", "ms": 3}), ("ideal", {"ls": "--"})])
    legend_below(fig, [*handles, *more], [*labels, *names])
    return fig


def cache_by_group(analyses: list[Analysis]) -> Figure:
    """Hit rate (bar) and ideal (tick) per agent and per endpoint, runs side by side."""
    labels, server, ideal, run_of = [], [], [], []
    for i, a in enumerate(analyses):
        for key in ("agent", "endpoint"):
            table = a.tables[key]
            for group, row in table.iterrows():
                name = (
                    "n/a" if group is None or group != group else group_label(group)
                )  # NaN: not recorded
                name = short(name)
                labels.append(f"{key} {name}")  # the run: by colour, named once in the legend
                server.append(row["hit_rate"])
                ideal.append(row["ideal_hit_rate"])
                run_of.append(i)
    fig, ax = figure(
        "Hit rate by agent and endpoint (bar: server; tick: ideal), over the requests whose"
        " server reported cached tokens",
        width=HALF,
        height=max(3.6, 0.8 + 0.32 * len(labels)),
    )
    palette = colors(analyses)
    y = np.arange(len(labels))
    ax.barh(y, np.nan_to_num(server), color=[palette[i] for i in run_of], height=0.6)
    ax.scatter(np.nan_to_num(ideal), y, marker="|", s=300, color=IDEAL, zorder=3)
    ax.set_yticks(y, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("hit rate")
    legend_below(fig, *_ideal_key(analyses))  # below the axes: the bars run to the right edge
    if not labels:
        no_data(ax)
    return fig


def _ideal_key(analyses: list[Analysis]) -> tuple[list, list[str]]:
    """Each run's bar colour (several runs), then the ideal's tick."""
    handles, labels = run_handles(analyses)
    tick = Line2D([], [], color=IDEAL, marker="|", ms=12, ls="none")
    return [*handles, tick], [*labels, "ideal (infinite cache)"]


def miss_categories(analyses: list[Analysis]) -> Figure:
    """Prompt tokens of each run split into hit and each miss category summary.json reports
    (those that are 0 in every run left out, evicted kept: its 0 is a finding)."""
    fig, ax = figure(
        "Prompt tokens: hit and each miss category (share of prompt tokens)", width=HALF
    )
    names = [short(a.run.name) for a in analyses]
    caches = [a.summary["cache"] for a in analyses]
    categories = list(dict.fromkeys(k for c in caches for k in c["miss_share_of_prompt_tokens"]))
    parts = {"hit": [1.0 - _share(c["missed_tokens"], c["prompt_tokens"]) for c in caches]}
    for k in categories:
        values = [float(c["miss_share_of_prompt_tokens"].get(k) or 0.0) for c in caches]
        if any(values) or k == "evicted":
            parts[k] = values
    left = np.zeros(len(analyses))
    for k, values in parts.items():
        ax.barh(names, values, left=left, color=outcome_color(k), label=label(k), height=0.5)
        left += np.asarray(values)
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of prompt tokens")
    ax.invert_yaxis()
    if analyses:  # below the bars, not over them; hit first
        legend_below(fig, *ax.get_legend_handles_labels())
    else:
        no_data(ax)
    return fig


def _share(part: float, whole: float) -> float:
    return float(part) / float(whole) if whole else 0.0


def outcome_count(analyses: list[Analysis]) -> int:
    """How many outcomes (hit, each miss category) have tokens in any run: with one, the figure
    would be one colour, and a sentence says it instead."""
    hit = any(float(np.nansum(a.misses["cached"])) > 0 for a in analyses)
    missed = {k for a in analyses for k, v in a.summary["cache"]["miss_tokens"].items() if v}
    return int(hit) + len(missed)
