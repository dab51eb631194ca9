"""`harness report --trend RUN...`: the trend page (inline SVG figures, a table of runs linking to
each run's report.html) and the terminal's regression lines, from `analysis.compare.trend`."""

from __future__ import annotations

import os
from pathlib import Path

from markupsafe import Markup

from harness.analysis.compare.notes import interval_text
from harness.analysis.compare.trend import Trend
from harness.report.colors import run_colors
from harness.report.embed import svg_text
from harness.report.html import CSS, SCRIPT
from harness.report.jinja import render
from harness.report.plots.narrow import narrow_layout
from harness.report.plots.trend import REGRESSED, axis_labels, trend_figure, trend_table
from harness.schema import REPORT_FILE


def trend_regressions(result: Trend) -> list[str]:
    """One line per regression, for the terminal, then the trend's verdict in a line."""
    if len(result.points) < 2:
        return [f"one run ({result.points[0].run if result.points else 'none'}): nothing to trend"]
    lines = []
    for p in result.points:
        for k in p.regressions:
            c = p.changes[k]
            lines.append(
                f"regression: {p.run} {result.labels[k]} {c.baseline:.4g} -> {c.run:.4g} "
                f"({c.change * 100:+.1f}%, interval {interval_text(c)}, {c.band_source})"
                if c.change is not None
                else f"regression: {p.run} {k}"
            )
    lines += result.series[1:]
    lines += [f"ended badly: {p.run}: {p.ended}" for p in result.points if p.ended]
    return lines + verdict_lines(result)


def verdict_lines(result: Trend) -> list[str]:
    """The trend's verdict in a line, then each series' latest run's (a reason on a line of its
    own): lines a terminal does not wrap."""
    latest = _latest_verdicts(result)
    if not latest:
        return ["no series has two runs, or two gate nights: nothing to judge"]
    lines = [
        f"trend verdict: {result.verdict} (the latest run or gate night of each series against those before it)"
    ]
    for run, verdict, why in latest:
        lines += [f"  {run}: {verdict}"] + ([f"    {why}"] if why else [])
    return lines


def verdict_line(result: Trend) -> str:
    """The latest run's verdict (the worst over the series), as the nightly job sees it."""
    latest = _latest_verdicts(result)
    if not latest:
        return "no series has two runs, or two gate nights: nothing to judge"
    parts = "; ".join(
        f"{run}: {verdict}" + (f": {why}" if why else "") for run, verdict, why in latest
    )
    return f"trend verdict: {result.verdict} (latest run or gate night against those before it: {parts})"


def _latest_verdicts(result: Trend) -> list[tuple[str, str, str]]:
    """Each series' latest judged run: its name, its verdict and why (not comparable: the
    reason; inconclusive: the runs that would decide it)."""
    latest = [p for p in {p.series: p for p in result.points}.values() if p.verdict is not None]
    out = []
    for p in latest:
        why = p.why_inconclusive or (
            f"about {p.runs_needed} more run(s) would decide it"
            if p.runs_needed
            else f"about {p.nights_needed} more night(s) would decide it"
            if p.nights_needed
            else ""
        )
        if p.verdict == "not comparable":
            why = (p.why_not_comparable or "").removeprefix(f"{p.run} ")
        elif p.verdict != "inconclusive":
            why = ""
        out.append((p.run, str(p.verdict), why))
    return out


def render_trend(result: Trend, base: Path, names: list[str]) -> str:
    """The page; `names`: each series by what sets it apart (analysis/compare/series_names.py)."""
    links = [os.path.relpath(p.path / REPORT_FILE, base) for p in result.points]
    header, rows = trend_table(result, links)
    ticks = axis_labels(result.points)
    key = list(zip(run_colors(len(names)), names, strict=False)) if len(names) > 1 else []
    return render(
        "trend.html",
        css=Markup(CSS + TREND_CSS),  # the page's own constants, not data
        script=Markup(SCRIPT),
        n=len(result.points),
        interval=f"{100 * (1 - result.alpha):g}",
        min_change=f"{result.min_change * 100:g}",
        series=result.series[1:],
        regressions=[(run, result.labels[k]) for run, k in result.regressions],
        verdict=verdict_line(result),
        ended=[(p.run, p.ended) for p in result.points if p.ended],
        figures=[_svg_figure(trend_figure(result, links, ticks), "The key metrics over the runs")],
        key=key,
        header=header,
        rows=rows,
    )


# A figure's SVG fits its column; a page at most 1100 px wide shows the drawing made at its width
# (the same point sizes, so its text reads at 800 px as the wide one's does at 1400 px).
TREND_CSS = (
    ".trend svg{display:block;width:100%;height:auto} .trend .narrow{display:none}"
    "@media (max-width:1100px){.trend .wide{display:none}.trend .narrow{display:block}}"
    " td.nowrap{white-space:nowrap} ul.legend.trend-key{font-size:.9rem;margin:.6rem 0}"
    f" ul.legend .regressed{{border-radius:50%;background:{REGRESSED};outline:1px solid #000}}"
)


def _svg_figure(fig, title: str) -> tuple[str, Markup, Markup | None]:
    """(title, the drawing, the drawing at a narrow page's width or None); the title is drawn in
    the figure, so the page gives no caption repeating it."""
    wide = _svg(fig)
    narrow = _svg(fig) if narrow_layout(fig) else None
    return title, wide, narrow


def _svg(fig) -> Markup:
    svg = svg_text(fig)
    return Markup(svg[svg.index("<svg") :])  # matplotlib's own SVG, without its XML prolog
