"""The trend page's parts: one figure per metric (points link to run reports) and the run table."""

from __future__ import annotations

from matplotlib.figure import Figure

from harness.report.plots import style
from harness.report.plots.axes import honest_ylim
from harness.report.text import fmt


def metric_svg(result, key: str, links: list[str]) -> Figure:
    """The metric over the runs in order; regressions in red; each point a link to its run's report."""
    points = result.points
    xs = list(range(len(points)))
    ys = [p.values.get(key) for p in points]
    style.apply()
    fig = Figure(figsize=(13.5, 2.6), dpi=100, layout="constrained")
    ax = fig.subplots()
    ax.set_title(result.labels[key], loc="left", fontsize="medium")
    for series in sorted({p.series for p in points}):  # one line per series, never joined
        known = [
            (x, y)
            for x, y, p in zip(xs, ys, points, strict=True)
            if y is not None and p.series == series
        ]
        if known:
            ax.plot(
                *zip(*known, strict=True),
                color=f"C{series}",
                lw=1.2,
                zorder=1,
                label=f"series {series + 1}",
            )
    if len({p.series for p in points}) > 1:
        ax.legend(loc="upper left", fontsize="small")
    for x, y, p, link in zip(xs, ys, points, links, strict=True):
        if y is None:
            continue
        worse = key in p.regressions
        dot = ax.scatter(
            [x],
            [y],
            s=90 if worse else 36,
            color="tab:red" if worse else f"C{p.series}",
            edgecolor="black" if worse else "none",
            zorder=2,
        )
        dot.set_urls([link])
        if worse:
            change = p.changes[key]
            ax.annotate(
                f"{change.change * 100:+.1f}%" if change.change is not None else "worse",
                (x, y),
                textcoords="offset points",
                xytext=(6, 6),
                color="tab:red",
                fontsize="small",
            )
    ax.set_xticks(xs, [p.run for p in points], rotation=20, ha="right", fontsize="small")
    ax.margins(x=0.03)
    honest_ylim(ax, ys)  # a floor on the range: a change within a few % stays small
    return fig


def _mark(change) -> str:
    """' (regressed +38.3%)' or ' (inconclusive +12.0%)' beside a change; nothing beside the
    first run of a series or a change none could see."""
    if change is None or change.verdict in (None, "no change detected"):
        return ""
    return (
        f" ({change.verdict}"
        + ("" if change.change is None else f" {change.change * 100:+.1f}%")
        + ")"
    )


def trend_table(result, links: list[str]) -> tuple[list[str], list[tuple]]:
    """The run table's header and rows: (link, run, started, [(cell, regressed)])."""
    keys = list(result.labels)
    header = ["run", "started", *(result.labels[k] for k in keys)]
    rows = []
    for p, link in zip(result.points, links, strict=True):
        cells = []
        for k in keys:
            change = p.changes.get(k)
            bad = change is not None and change.verdict == "regressed"
            cells.append((fmt(p.values.get(k)) + _mark(change), bad))
        rows.append((link, p.run, str(p.started_at or ""), cells))
    return header, rows
