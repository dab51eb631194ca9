"""`harness report --trend RUN...`: the key metrics over a series of runs (e.g. nightly), in run order.

Each run is compared with the run before it by `compare_analyses`, the very decision `harness
compare` makes (Mann-Whitney U p < alpha and |change| >= min_change); a point whose change is
significant and worse is a regression and is marked. Comparing with the previous run (not the
first) marks the night a regression arrived, not every night after it. Each point links to its
run's report.html (written where a run has none yet). The page is one self-contained file: the
figures are inline SVG, so the links are clickable.
"""

from __future__ import annotations

import html
import io
import os
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.compare import MetricChange, compare_analyses
from harness.analysis.compare_metrics import HEADLINE, Side
from harness.analysis.records import load_runs
from harness.analysis.summary import Analysis, analyze
from harness.schema import REPORT_FILE

# The metrics drawn, by their `harness compare` keys.
TREND_METRICS = (
    "ttft_p90",
    "tpot_p90",
    "e2el_p90",
    "interactivity_p90",
    "tpgs",
    "cache_hit_rate",
    "error_rate",
)


@dataclass
class TrendPoint:
    run: str
    path: Path
    started_at: str | None
    values: dict[str, float | None]  # metric key -> the run's value
    changes: dict[
        str, MetricChange
    ]  # metric key -> against the previous run (absent for the first)

    @property
    def regressions(self) -> list[str]:
        return [k for k, c in self.changes.items() if c.verdict == "worse"]


@dataclass
class Trend:
    points: list[TrendPoint]
    labels: dict[str, str]  # metric key -> label
    alpha: float
    min_change: float

    @property
    def regressions(self) -> list[tuple[str, str]]:
        return [(p.run, k) for p in self.points for k in p.regressions]


def run_order(analyses: list[Analysis]) -> list[Analysis]:
    """Runs by the manifest's start time, then by name (a folder per night sorts by date too)."""
    return sorted(analyses, key=lambda a: (str(a.run.manifest.get("started_at") or ""), a.run.name))


def trend(run_dirs, alpha: float = 0.01, min_change: float = 0.02) -> tuple[Trend, list[Analysis]]:
    analyses = run_order([analyze(r) for r in load_runs(run_dirs)])
    metrics = [m for m in HEADLINE if m.key in TREND_METRICS]
    points = []
    for i, a in enumerate(analyses):
        changes = {}
        if i:
            rows = compare_analyses([analyses[i - 1]], [a], alpha=alpha, min_change=min_change).rows
            changes = {r.key: r for r in rows if r.key in TREND_METRICS}
        points.append(
            TrendPoint(
                run=a.run.name,
                path=a.run.path,
                started_at=a.run.manifest.get("started_at"),
                values={m.key: m.value(Side([a])) for m in metrics},
                changes=changes,
            )
        )
    return Trend(points, {m.key: m.label for m in metrics}, alpha, min_change), analyses


def trend_regressions(result: Trend) -> list[str]:
    """One line per regression, for the terminal; a line saying there is none otherwise."""
    lines = []
    for p in result.points:
        for k in p.regressions:
            c = p.changes[k]
            lines.append(
                f"regression: {p.run} {result.labels[k]} {c.baseline:.4g} -> {c.run:.4g} "
                f"({c.change * 100:+.1f}%, p={c.p_value:.2g})"
                if c.change is not None
                else f"regression: {p.run} {k}"
            )
    return lines or [f"no significant regression over {len(result.points)} runs"]


def write_trend(
    run_dirs, out_path: str | Path, alpha: float = 0.01, min_change: float = 0.02
) -> tuple[Path, Trend]:
    from harness.analysis.report import render_report

    result, analyses = trend(run_dirs, alpha, min_change)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    for a in analyses:  # each point links to its run's report; write the ones not there yet
        page = a.run.path / REPORT_FILE
        if not page.is_file():
            page.write_text(render_report([a]), encoding="utf-8")
    out.write_text(render_trend(result, out.parent), encoding="utf-8")
    return out, result


def render_trend(result: Trend, base: Path) -> str:
    from harness.analysis.report import CSS, SCRIPT
    from harness.analysis.trend_render import metric_svg, trend_table

    links = [os.path.relpath(p.path / REPORT_FILE, base) for p in result.points]
    marked = result.regressions
    summary = (
        f"{len(marked)} significant regression(s): "
        + "; ".join(f"{html.escape(run)} {html.escape(result.labels[k])}" for run, k in marked)
        if marked
        else "no significant regression"
    )
    body = [
        f"<h1>Trend over {len(result.points)} runs</h1>",
        f'<p class="note">Each run against the run before it: Mann-Whitney U p &lt; {result.alpha:g} and '
        f"|change| &ge; {result.min_change * 100:g}% in the worse direction is a regression (red); "
        "the same decision as <code>harness compare</code>. Click a point or a run name for its report.</p>",
        f'<p class="{"warn" if marked else "note"}" id="regressions">{summary}</p>',
    ]
    body += [
        _svg_figure(metric_svg(result, key, links), result.labels[key]) for key in result.labels
    ]
    body += ["<h2>Runs</h2>", trend_table(result, links)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>trend</title>'
        f"<style>{CSS}</style><script>{SCRIPT}</script></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _svg_figure(fig, title: str) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML prolog and doctype: inline in HTML
    return f'<figure class="trend">{svg}<figcaption>{html.escape(title)}</figcaption></figure>'
