"""The report's figures (seaborn on the Agg backend: no display needed).

Each function takes one or more `Analysis` objects and returns a matplotlib Figure; several runs
share one figure so they compare at a glance. Distributions are drawn from at most
`MAX_POINTS` requests per run (an evenly spaced subsample) so a million-record run still plots
in seconds; the numbers in the tables always come from the full data.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness.analysis.cache import breakdown  # noqa: E402
from harness.analysis.summary import Analysis  # noqa: E402

MAX_POINTS = 20_000
MAX_LANES = 24
sns.set_theme(style="whitegrid", context="notebook")


def _figure(title: str, width: float = 7.0, height: float = 4.0) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(width, height), dpi=100, layout="constrained")
    ax.set_title(title)
    return fig, ax


def _legend(ax: plt.Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")
    else:
        ax.text(0.5, 0.5, "no ok requests to plot", ha="center", transform=ax.transAxes)


def _thin(values: np.ndarray) -> np.ndarray:
    v = values[np.isfinite(values)]
    return v[:: max(1, v.size // MAX_POINTS)] if v.size > MAX_POINTS else v


def _long(analyses: list[Analysis], column: str) -> pd.DataFrame:
    frames = [pd.DataFrame({"value": _thin(a.per_request[column].to_numpy(dtype=float)), "run": a.run.name})
              for a in analyses]
    return pd.concat(frames, ignore_index=True)


def latency_cdf(analyses: list[Analysis], column: str, label: str) -> Figure:
    fig, ax = _figure(f"{label}: cumulative distribution")
    data = _long(analyses, column)
    if not data.empty:
        sns.ecdfplot(data=data, x="value", hue="run", ax=ax)
        ax.set_xscale("log")
    for q in (0.5, 0.9, 0.99):
        ax.axhline(q, color="grey", lw=0.6, ls=":")
    ax.set_xlabel(f"{label} (s, log scale)")
    ax.set_ylabel("fraction of requests")
    return fig


def interactivity(analyses: list[Analysis]) -> Figure:
    fig, ax = _figure("Interactivity per request (1 / TPOT)")
    data = _long(analyses, "interactivity")
    if not data.empty:
        sns.histplot(data=data, x="value", hue="run", element="step", stat="density", common_norm=False, ax=ax)
    for a, color in zip(analyses, sns.color_palette(), strict=False):
        p90 = a.summary["interactivity_p90"]
        if p90:
            ax.axvline(p90, color=color, ls="--", lw=1.2, label=f"{a.run.name} P90 = {p90:.3g}")
    ax.set_xlabel("tokens/s/user")
    _legend(ax)
    return fig


def cache_by_turn(analyses: list[Analysis]) -> Figure:
    fig, ax = _figure("Prefix-cache hit rate by turn index: server vs ideal")
    for a, color in zip(analyses, sns.color_palette(), strict=False):
        table = breakdown(a.run.ok, a.misses, "turn")
        ax.plot(table.index, table["hit_rate"], marker="o", color=color, label=f"{a.run.name} server")
        ax.plot(table.index, table["ideal_hit_rate"], ls="--", color=color, label=f"{a.run.name} ideal")
    ax.set_xlabel("turn index")
    ax.set_ylabel("hit rate")
    ax.set_ylim(0, 1.02)
    _legend(ax)
    return fig


def over_time(analyses: list[Analysis], bins: int = 60) -> Figure:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), dpi=100, sharex=True, layout="constrained")
    top.set_title("Throughput and requests in flight over time")
    for a, color in zip(analyses, sns.color_palette(), strict=False):
        ok = a.run.ok
        if ok.empty:
            continue
        t0 = float(ok["t_sent"].min())
        done = ok["t_done"].to_numpy(dtype=float) - t0
        width = max(done.max(), 1e-9) / bins
        tokens = np.nan_to_num(a.per_request["completion_tokens"].to_numpy(dtype=float))
        rate = np.bincount(np.minimum((done / width).astype(int), bins - 1), weights=tokens, minlength=bins) / width
        top.step(np.arange(bins) * width, rate, where="post", color=color, label=a.run.name)
        times, level = _in_flight(a.run.measured, t0)
        bottom.step(times, level, where="post", color=color, label=a.run.name)
    top.set_ylabel("output tokens/s")
    bottom.set_ylabel("requests in flight")
    bottom.set_xlabel("seconds since the first measured send")
    _legend(top)
    return fig


def _in_flight(measured: pd.DataFrame, t0: float) -> tuple[np.ndarray, np.ndarray]:
    sent = measured["t_sent"].to_numpy(dtype=float) - t0
    done = measured["t_done"].fillna(measured["t_sent"]).to_numpy(dtype=float) - t0
    times = np.concatenate([sent, done])
    steps = np.concatenate([np.ones(sent.size), -np.ones(done.size)])
    order = np.argsort(times, kind="stable")
    return times[order], np.cumsum(steps[order])


def session_timeline(a: Analysis) -> Figure:
    """Swim lanes of the longest complete task: one lane per session, bars per request,
    arrows for spawns (parent -> subagent) and joins (subagent -> parent)."""
    tasks = a.tasks[a.tasks["complete"]].sort_values("completion_s", ascending=False)
    fig, ax = _figure("Session timeline of the longest task (swim lanes)", height=4.5)
    if tasks.empty:
        ax.text(0.5, 0.5, "no complete task", ha="center", transform=ax.transAxes)
        return fig
    task = tasks.iloc[0]["task"]
    recs = a.graph.recs[a.graph.recs["task"] == task]
    lanes = {sid: i for i, sid in enumerate(list(dict.fromkeys(recs.sort_values("t_sent")["session_id"]))[:MAX_LANES])}
    critical = set(a.graph.critical_path(task))
    where = {}
    for r in recs.itertuples(index=False):
        if r.session_id not in lanes:
            continue
        y = lanes[r.session_id]
        color = "tab:red" if r.request_id in critical else ("tab:blue" if r.agent == "main" else "tab:green")
        ax.barh(y, r.t_done - r.t_sent, left=r.t_sent, height=0.5, color=color, lw=0)
        where[r.request_id] = (r.t_sent, r.t_done, y)
    for src, dst in a.graph.links(task):
        if src in where and dst in where:
            ax.annotate("", xy=(where[dst][0], where[dst][2]), xytext=(where[src][1], where[src][2]),
                        arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.8})
    ax.set_yticks(list(lanes.values()), list(lanes.keys()))
    ax.invert_yaxis()
    ax.set_xlabel("run clock (s); red = critical path, blue = main, green = subagent")
    return fig


def pareto_frontier(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (both maximized),
    ordered by the first coordinate: InferenceX's throughput-vs-interactivity frontier."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    frontier, best = [], -np.inf
    for i in order:
        if points[i][1] > best:
            frontier.append(i)
            best = points[i][1]
    return sorted(frontier, key=lambda i: points[i][0])


def pareto(analyses: list[Analysis]) -> Figure:
    fig, ax = _figure("TPGS vs P90 interactivity (sweep points; line = Pareto frontier)")
    pts = [(a.summary["interactivity_p90"], a.summary["tpgs"], a.run.name) for a in analyses]
    pts = [p for p in pts if p[0] is not None and p[1] is not None]
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], color="tab:blue")
    for x, y, name in pts:
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize="small")
    front = [pts[i] for i in pareto_frontier([(p[0], p[1]) for p in pts])]
    ax.plot([p[0] for p in front], [p[1] for p in front], color="tab:red", marker="o")
    ax.set_xlabel("P90 interactivity (tokens/s/user)")
    ax.set_ylabel("TPGS (tokens/s/GPU)")
    return fig


def all_figures(analyses: list[Analysis]) -> dict[str, Figure]:
    figures = {
        "TTFT distribution": latency_cdf(analyses, "ttft", "TTFT"),
        "TPOT distribution": latency_cdf(analyses, "tpot", "TPOT"),
        "Interactivity": interactivity(analyses),
        "Cache hit by turn": cache_by_turn(analyses),
        "Over time": over_time(analyses),
    }
    for a in analyses:
        figures[f"Session timeline: {a.run.name}"] = session_timeline(a)
    if len(analyses) > 1:
        figures["Pareto frontier"] = pareto(analyses)
    return figures
