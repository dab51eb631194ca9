"""`harness report --trend RUN...`: the trend page (inline SVG figures, a table of runs linking to
each run's report.html) and the terminal's regression lines, from `analysis.compare.trend`."""

from __future__ import annotations

import html
import io
import os
from pathlib import Path

import matplotlib.pyplot as plt

from harness.analysis.compare.notes import interval_text
from harness.analysis.compare.trend import Trend
from harness.report.html import CSS, SCRIPT
from harness.report.plots.narrow import narrow_layout
from harness.report.plots.trend import metric_svg, trend_table
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
    return lines + [verdict_line(result)]


def verdict_line(result: Trend) -> str:
    """The latest run's verdict (the worst over the series), as the nightly job sees it."""
    latest = {p.series: p for p in result.points}.values()
    judged = [p for p in latest if p.verdict is not None]
    if not judged:
        return "no series has two runs: nothing to judge"
    parts = []
    for p in judged:
        more = f", about {p.runs_needed} more run(s) would decide it" if p.runs_needed else ""
        parts.append(f"{p.run}: {p.verdict}{more if p.verdict == 'inconclusive' else ''}")
    return f"trend verdict: {result.verdict} (latest run against the runs before it: {'; '.join(parts)})"


def render_trend(result: Trend, base: Path) -> str:
    links = [os.path.relpath(p.path / REPORT_FILE, base) for p in result.points]
    marked = result.regressions
    summary = (
        f"{len(marked)} regression(s): "
        + "; ".join(f"{html.escape(run)} {html.escape(result.labels[k])}" for run, k in marked)
        if marked
        else "no regression"
    ) + f". {html.escape(verdict_line(result))}"
    body = [
        f"<h1>Trend over {len(result.points)} runs</h1>",
        f'<p class="note">Each run against the run before it in its series, the earlier runs of the'
        f" series as history: a {100 * (1 - result.alpha):g}% interval across runs wholly worse and"
        f" |change| &ge; {result.min_change * 100:g}% is a regression (red); a run with no usable"
        " history is at most inconclusive. Runs of another trace, load or target configuration are"
        " another series (another line). The same decision as <code>harness compare</code>. Click"
        " a point or a run name for its report.</p>",
        *(f'<p class="note">{html.escape(s)}</p>' for s in result.series[1:]),
        f'<p class="{"warn" if marked else "note"}" id="regressions">{summary}</p>',
        *(
            f'<p class="warn">{html.escape(p.run)}: {html.escape(p.ended)}</p>'
            for p in result.points
            if p.ended
        ),
    ]
    body += [
        _svg_figure(metric_svg(result, key, links), result.labels[key]) for key in result.labels
    ]
    body += ["<h2>Runs</h2>", trend_table(result, links)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>trend</title>'
        f"<style>{CSS}{TREND_CSS}</style><script>{SCRIPT}</script></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


# A figure's SVG fits its column; a page at most 1100 px wide shows the drawing made at its width
# (the same point sizes, so its text reads at 800 px as the wide one's does at 1400 px).
TREND_CSS = (
    ".trend svg{max-width:100%;height:auto} .trend .narrow{display:none}"
    "@media (max-width:1100px){.trend .wide{display:none}.trend .narrow{display:block}}"
)


def _svg_figure(fig, title: str) -> str:
    wide = _svg(fig)
    narrow = _svg(fig) if narrow_layout(fig) else None
    plt.close(fig)
    drawn = (
        wide
        if narrow is None
        else f'<div class="wide">{wide}</div><div class="narrow">{narrow}</div>'
    )
    # the title is drawn in the figure: a caption would repeat it
    return f'<figure class="trend" aria-label="{html.escape(title)}">{drawn}</figure>'


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]  # drop the XML prolog and doctype: inline in HTML
