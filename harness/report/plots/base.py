"""The report's figures (matplotlib Figures drawn by the Agg canvas: no display, no pyplot).

Each function takes one or more `Analysis` objects and returns a matplotlib Figure; several runs
share one figure so they compare at a glance. Distributions are drawn from at most
`MAX_POINTS` requests per run (an evenly spaced subsample) so a million-record run still plots
in seconds; the numbers in the tables always come from the full data.
"""

from __future__ import annotations

import textwrap

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from harness.analysis.compare.comparable import not_comparable
from harness.analysis.frontier import pareto_frontier
from harness.analysis.summary_types import Analysis
from harness.report.numbers import fmt, human
from harness.report.plots import style as look
from harness.report.plots.axes import clip_log_x, log_span, tail_note

MAX_POINTS = 20_000
MAX_LANES = 24
look.apply()
TITLE_PT = 12  # the figure title's size, for wrapping it inside the figure


WIDE = 13.5  # inches at 100 dpi: a figure across a 1400 px page
HALF = 6.6  # two side by side
PERCENTILES = ((0.5, "p50", ":"), (0.9, "p90", "--"), (0.99, "p99", "-."))


def _figure(title: str, width: float = HALF, height: float = 3.6) -> tuple[Figure, Axes]:
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
    """A tick label cut to `limit` characters, keeping its end (where run and endpoint names
    differ); the page names the whole run elsewhere."""
    return name if len(name) <= limit else "…" + name[-(limit - 1) :]


def series_label(analyses: list[Analysis], a: Analysis, what: str = "") -> str:
    """A legend entry: `what` alone for one run (the page names it), else the run's name once."""
    if len(analyses) == 1:
        return what or "_nolegend_"
    return short(a.run.name, 36)


def style_key(ax: Axes, styles: list[tuple[str, dict]], **legend) -> None:
    """A legend of line styles (in grey) after the runs' colours: each run named once, each
    style once, instead of one entry per run and style."""
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    for label, kw in styles:
        handles.append(Line2D([], [], color="dimgrey", **kw))
        labels.append(label)
    if handles:
        ax.legend(handles, labels, fontsize="small", **legend)


def _legend(ax: Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")
    elif not ax.get_lines() and not ax.patches:
        ax.text(0.5, 0.5, "no ok requests to plot", ha="center", transform=ax.transAxes)


def _thin(values: np.ndarray) -> np.ndarray:
    v = values[np.isfinite(values)]
    return v[:: max(1, v.size // MAX_POINTS)] if v.size > MAX_POINTS else v


def _long(analyses: list[Analysis], column: str) -> pd.DataFrame:
    frames = [
        pd.DataFrame(
            {"value": _thin(a.per_request[column].to_numpy(dtype=float)), "run": a.run.name}
        )
        for a in analyses
    ]
    return pd.concat(frames, ignore_index=True)


def log_x(ax: Axes) -> None:
    """A log x axis; one spanning less than ~1.5 decades has at most one labelled power of ten,
    so its minor ticks at 2, 3 and 5 times a power are labelled too, in plain numbers."""
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    narrow = lo > 0 and hi / lo < 30
    # only the minor ticks that carry a label: the style draws no tick marks, so the others
    # would be invisible, and each tick is a few artists to make and lay out
    ticker = matplotlib.ticker
    # powers of ten in plain numbers (0.01, 0.1, 1), not 10^-2 in mathtext: easier to read,
    # and mathtext's parser (pyparsing) is a tenth of the report's drawing time
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(_major_label))
    if narrow:
        ax.xaxis.set_minor_locator(ticker.LogLocator(subs=(2.0, 3.0, 5.0)))
        ax.xaxis.set_minor_formatter(ticker.FuncFormatter(_minor_label))
    else:
        ax.xaxis.set_minor_locator(ticker.NullLocator())


def _major_label(value: float, _pos) -> str:
    return human(value, 1)


def _minor_label(value: float, _pos) -> str:
    mantissa = value / 10 ** np.floor(np.log10(value)) if value > 0 else 0.0
    return human(value, 1) if round(mantissa, 6) in (2.0, 3.0, 5.0) else ""


def colors(analyses: list[Analysis]) -> list:
    return look.palette(len(analyses))


def latency_cdf(analyses: list[Analysis], column: str, label: str) -> Figure:
    """Empirical CDF on a log time axis; each run's p50/p90/p99 marked where its curve crosses them."""
    fig, ax = _figure(f"{label}: cumulative distribution (log axis)")
    for a, color in zip(analyses, colors(analyses), strict=False):
        v = np.sort(_thin(a.per_request[column].to_numpy(dtype=float)))
        v = v[v > 0]
        if not v.size:
            continue
        ax.step(
            v,
            np.arange(1, v.size + 1) / v.size,
            where="post",
            color=color,
            label=series_label(analyses, a),
        )
        full = a.per_request[column].to_numpy(dtype=float)
        full = full[np.isfinite(full)]
        for q, name, _ in PERCENTILES:
            x = float(np.percentile(full, q * 100))
            ax.plot([x], [q], marker="o", color=color, ms=5)
            if len(analyses) == 1:  # with several runs the values are in the strip and the tables
                ax.annotate(
                    f"{name} {fmt(x, '.3g')} s",
                    (x, q),
                    textcoords="offset points",
                    xytext=(5, -11),
                    fontsize="x-small",
                    color=color,
                )
    if any(np.size(line.get_xdata()) for line in ax.get_lines()):
        pooled = np.concatenate([a.per_request[column].to_numpy(dtype=float) for a in analyses])
        clip_log_x(ax, pooled)  # one 1e-5 s outlier no longer stretches the axis
        log_x(ax)
    for q, _, style in PERCENTILES:
        ax.axhline(q, color="grey", lw=0.6, ls=style)
    ax.set_xlabel(f"{label} (s, log scale)")
    ax.set_ylabel("fraction of requests")
    _legend(ax)
    return fig


def interactivity(analyses: list[Analysis]) -> Figure:
    """Per-request 1 / TPOT on log-spaced bins: one outlier no longer squeezes the rest into one bar."""
    fig, ax = _figure(
        "Interactivity per request (1 / TPOT), log axis; dashed: P90 interactivity = 1 / p90(TPOT)"
    )
    data = _long(analyses, "interactivity")
    data = data[data["value"] > 0]
    span = log_span(data["value"].to_numpy(dtype=float)) if not data.empty else None
    if span is not None:
        lo, hi = np.log10(span[0]), np.log10(span[1])
        bins = np.logspace(lo - 0.05, hi + 0.05, 40)
        for a, color in zip(analyses, colors(analyses), strict=False):
            values = data.loc[data["run"] == a.run.name, "value"].to_numpy()
            _density_steps(ax, values, bins, color)
        log_x(ax)
        tail_note(ax, span[2], span[3])
    for a, color in zip(analyses, colors(analyses), strict=False):
        p90 = a.summary["interactivity_p90"]
        if p90:
            ax.axvline(
                p90,
                color=color,
                ls="--",
                lw=1.2,
                label=(f"{short(a.run.name, 36)}: " if len(analyses) > 1 else "")
                + f"P90 = {human(p90)}",
            )
    ax.set_xlabel("tokens/s/user (log scale)")
    _legend(ax)
    return fig


def _density_steps(ax: Axes, values: np.ndarray, bins: np.ndarray, color) -> None:
    """A run's histogram as a density drawn in steps (each run its own area, so runs of other
    sizes compare), as seaborn's `histplot(element="step", stat="density")` drew it."""
    if not values.size:
        return
    density, edges = np.histogram(values, bins=bins, density=True)
    heights = np.append(density, density[-1])
    area = ax.fill_between(edges, heights, step="post", facecolor=(*color, 0.25), edgecolor=color)
    area.sticky_edges.y[:] = [0]  # the density axis starts at 0, with no margin below
    ax.set_ylabel("Density")


def session_timeline(a: Analysis) -> Figure:
    """Swim lanes of the longest complete task with subagents (else the longest task): one lane
    per session, bars per request, arrows for spawns (parent -> subagent) and joins (subagent ->
    parent)."""
    task, why = timeline_task(a.tasks)
    title = f"Session timeline (swim lanes) of task {task}: {why}" if task else why
    fig, ax = _figure(title, width=WIDE, height=4.2)
    if task is None:
        ax.text(0.5, 0.5, "no complete task", ha="center", transform=ax.transAxes)
        return fig
    recs = a.graph.recs[a.graph.recs["task"] == task]
    lanes = {
        sid: i
        for i, sid in enumerate(
            list(dict.fromkeys(recs.sort_values("t_sent")["session_id"]))[:MAX_LANES]
        )
    }
    critical = set(a.graph.critical_path(task))
    where = {}
    bars: list[tuple[float, float, float, str]] = []  # (lane, start, end, colour): one barh
    for r in recs.itertuples(index=False):
        if r.session_id not in lanes:
            continue
        y = lanes[r.session_id]
        color = (
            "tab:red"
            if r.request_id in critical
            else ("tab:blue" if r.agent == "main" else "tab:green")
        )
        bars.append((y, r.t_sent, r.t_done, color))
        where[r.request_id] = (r.t_sent, r.t_done, y)
    if bars:
        lane, start, end, colour = (list(column) for column in zip(*bars, strict=True))
        width = np.subtract(end, start)
        ax.barh(lane, width, left=start, height=0.5, color=colour, lw=0)
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
    ax.set_xlabel("run clock (s); red = critical path, blue = main, green = subagent")
    return fig


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


def pareto(analyses: list[Analysis]) -> Figure:
    fig, ax = _figure("TPGS vs P90 interactivity (runs as points; line = Pareto frontier)")
    pts = [
        (x, y, a.run.name)
        for a in analyses
        if (x := a.summary["interactivity_p90"]) is not None
        and (y := a.summary["tpgs"]) is not None
    ]
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], color="tab:blue")
    for x, y, name in pts:
        ax.annotate(
            short(name), (x, y), textcoords="offset points", xytext=(4, 4), fontsize="small"
        )
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: human(v)))
    why_not = not_comparable(analyses[:1], analyses[1:]).get("tpgs")
    if why_not is None:  # a frontier only among runs that measured the same thing
        front = [pts[i] for i in pareto_frontier([(p[0], p[1]) for p in pts])]
        ax.plot([p[0] for p in front], [p[1] for p in front], color="tab:red", marker="o")
    else:
        figure_title(fig, f"TPGS vs P90 interactivity (no frontier: {why_not})")
    ax.set_xlabel("P90 interactivity (tokens/s/user)")
    ax.set_ylabel("TPGS (tokens/s/GPU)")
    return fig
