"""The trend page's parts: the key metrics over the runs, a panel each (points link to run reports),
and the run table."""

from __future__ import annotations

from datetime import datetime

from matplotlib.figure import Figure

from harness.report.colors import run_colors
from harness.report.numbers import fmt
from harness.report.plots.axes import honest_ylim, stepped_y
from harness.report.plots.base import WIDE

REGRESSED = "#b00000"


def trend_figure(result, links: list[str], ticks: list[str]) -> Figure:
    """Each metric over the runs in order, one panel each on one shared axis (the runs named
    once, under the last panel, by `ticks`: dates or short ids the table names); a line per
    series in its colour (the page's legend names them, outside the panels); regressions ringed
    in red; each point a link to its run's report."""
    keys = list(result.labels)
    fig = Figure(figsize=(WIDE, 0.35 + 1.55 * len(keys)), dpi=100, layout="constrained")
    axes = fig.subplots(len(keys), 1, sharex=True, squeeze=False)[:, 0]
    for ax, key in zip(axes, keys, strict=True):
        _panel(ax, result, key, links)
    axes[-1].set_xticks(range(len(result.points)), ticks, fontsize="small")
    axes[-1].margins(x=0.03)
    return fig


def _panel(ax, result, key: str, links: list[str]) -> None:
    points = result.points
    ys = [p.values.get(key) for p in points]
    palette = run_colors(len(result.series))
    ax.set_title(result.labels[key], loc="left", fontsize="medium")
    for series in sorted({p.series for p in points}):  # one line per series, never joined
        known = [
            (x, y)
            for x, (y, p) in enumerate(zip(ys, points, strict=True))
            if y is not None and p.series == series
        ]
        if known:
            ax.plot(*zip(*known, strict=True), color=palette[series], lw=1.2, zorder=1)
    for x, (y, p, link) in enumerate(zip(ys, points, links, strict=True)):
        if y is not None:
            _point(ax, x, y, p, key, palette[p.series]).set_urls([link])
    honest_ylim(ax, ys)  # a floor on the range: a change within a few % stays small
    stepped_y(ax)


def _point(ax, x: int, y: float, p, key: str, color: str):
    """A run's dot; a regression larger, red, ringed, its change beside it."""
    worse = key in p.regressions
    dot = ax.scatter(
        [x],
        [y],
        s=90 if worse else 36,
        color=REGRESSED if worse else color,
        edgecolor="black" if worse else "none",
        zorder=2,
    )
    if worse:
        change = p.changes[key]
        ax.annotate(
            f"{change.change * 100:+.1f}%" if change.change is not None else "worse",
            (x, y),
            textcoords="offset points",
            xytext=(6, 6),
            color=REGRESSED,
            fontsize="small",
        )
    return dot


def axis_labels(points) -> list[str]:
    """Each run on the trend's axis: its start as 'MM-DD HH:MM' when that tells every run apart,
    else its number in the table ('#3')."""
    stamps = [_short_time(p.started_at) for p in points]
    if all(stamps) and len(set(stamps)) == len(stamps):
        return [s[5:] for s in stamps]  # the year is in the table
    return [f"#{i + 1}" for i in range(len(points))]


def _short_time(stamp: str | None) -> str:
    """'2026-12-06T14:52:07.123+00:00' -> '2026-12-06 14:52'; '' when there is none."""
    if not stamp:
        return ""
    try:
        return datetime.fromisoformat(stamp).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return ""


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
    header = ["#", "run", "started", *(result.labels[k] for k in keys)]
    rows = []
    for p, link in zip(result.points, links, strict=True):
        cells = []
        for k in keys:
            change = p.changes.get(k)
            bad = change is not None and change.verdict == "regressed"
            cells.append((fmt(p.values.get(k)) + _mark(change), bad))
        rows.append((link, p.run, _short_time(p.started_at), cells))
    return header, rows
