"""`report.html`: one self-contained page (inline CSS, figures as base64 SVG or PNG, no network),
top down by the questions a reader asks.

0. What was tested (target, model, API, load, token scale, device, duration, trace: report/tested.py),
   the caveats (simulated timings, imported runs) and every warning, grouped, in one collapsed banner.
1. The headline strip: TTFT p90, P90 interactivity, TPGS (cached / uncached / output, on which
   device), cache hit vs ideal and where the cache missed, with SLO verdicts (report/headline.py).
2. Where time went: TTFT and TPOT CDFs on log axes with p50/p90/p99 marked; interactivity, beside
   it E2EL's CDF (one run) or TPGS against P90 interactivity with the runs' frontier (several).
3. What the cache did: hit vs ideal by turn, agent and endpoint; the miss categories as a figure
   and a small table, what each means and the server rules behind a disclosure.
4. What load was held: tasks and requests in flight vs target and the rolling hit rate vs ideal,
   over time, the analyzer's measured window shaded and the reason it was chosen stated.
5. Sessions: swim lanes with the critical path; the slowest tasks.
6. Full tables, collapsed.

Every figure is drawn at its column's width on a 1400 px page and fills its column at any
width (a wide one drawn again for a narrow page), legends under the axes. Several runs sit side
by side: a strip per run, one colour per run in every figure (report/colors.py), a
significance-tested comparison of each run against the first. Each figure carries the number of
data points it drew (`data-points`), and a small inline script marks the page once every figure
has decoded (`data-figures="loaded/total"`); the browser test reads both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from markupsafe import Markup

from harness.analysis.summary_types import Analysis
from harness.report.cache_parts import html_tables
from harness.report.embed import figure_html, sentence_html
from harness.report.headline import headline_strip
from harness.report.jinja import macro, render, template_module
from harness.report.notes import banners, miss_table, window_note
from harness.report.plots.base import colors
from harness.report.plots.cache import cache_by_group, cache_by_turn, miss_categories, outcome_count
from harness.report.plots.cache_parts import cache_parts, has_parts
from harness.report.plots.cache_tiers import cache_tiers, has_tiers, tiers_used
from harness.report.plots.latency import interactivity, latency_cdf
from harness.report.plots.load import load_held
from harness.report.plots.pareto import pareto
from harness.report.plots.sessions import session_timeline
from harness.report.speculation import spec_table
from harness.report.tables import cache_tables, compare_section, summary_rows, task_tables
from harness.report.tested import tested_html
from harness.report.validity import BANNER_CSS, invalid_banner
from harness.report.whatif import whatif_section

if TYPE_CHECKING:  # its module imports the comparison's statistics, which one run never needs
    from harness.analysis.side_by_side import SideBySide

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem auto;max-width:1400px;padding:0 1rem;color:#222}
h1{font-size:1.5rem;margin-bottom:.4rem} h2{font-size:1.2rem;margin-top:1.8rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.85rem;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:right} th:first-child,td:first-child{text-align:left}
thead th{background:#f3f3f3} .note{color:#555;font-size:.85rem} td.bad{background:#fde8e8;color:#a00;font-weight:600}
.sim{background:#fff3cd;border:1px solid #e0c060;padding:.6rem 1rem;border-radius:4px}
.warn{background:#fde8e8;border:1px solid #d99;padding:.4rem 1rem;border-radius:4px}
.imported{background:#eef4fb;border:1px solid #9bd;padding:.4rem 1rem;border-radius:4px;font-size:.9rem}
.tested dl{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:.2rem .8rem;margin:.4rem 0 .7rem;font-size:.9rem;border:1px solid #ccd;border-radius:6px;padding:.5rem .8rem;background:#fafbff}
.tested dt{font-weight:600;color:#445} .tested dd{margin:0;overflow-wrap:anywhere}
.tested table{margin:.3rem 0 .6rem;font-size:.9rem} .tested th{background:none;font-weight:600;text-align:left}
.tested td{text-align:left;max-width:40rem;overflow-wrap:anywhere} .tested tr.differ td{background:#fff7e0}
.tested tr.outcome th{font-weight:400;color:#667} .tested tbody.outcomes{border-top:2px solid #ccd}
table.misses{margin:.3rem 0 .4rem} details.rules{font-size:.85rem;color:#444} details.rules summary{font-weight:400}
details.rules dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .7rem;margin:.3rem 0} details.rules dt{font-weight:600}
details.warn{padding:.3rem 1rem} details.warn li{margin:.15rem 0}
.caveat{font-size:.8rem;color:#7a4b00;margin-top:.2rem}
.bar{display:flex;height:.7rem;margin:.35rem 0 .2rem;border-radius:3px;overflow:hidden} .bar span{display:block;height:100%}
ul.legend{list-style:none;padding:0;margin:.1rem 0;font-size:.8rem;display:flex;flex-wrap:wrap;gap:.1rem .7rem}
ul.legend i{display:inline-block;width:.65rem;height:.65rem;margin-right:.25rem;vertical-align:-1px}
.strip{display:flex;gap:.8rem;margin:.6rem 0;align-items:stretch;flex-wrap:wrap}
.runname{writing-mode:vertical-rl;transform:rotate(180deg);font-size:.8rem;color:#555;max-height:8rem;overflow:hidden}
.card{flex:1 1 0;min-width:13rem;border:1px solid #ccd;border-radius:6px;padding:.6rem .9rem;background:#fafbff}
.card .label{font-size:.8rem;text-transform:uppercase;letter-spacing:.04em;color:#556}
.card .value{font-size:1.7rem;font-weight:600;margin:.15rem 0;white-space:nowrap} .card .unit{font-size:.55em;margin-left:.25em}
.card .sub{font-size:.8rem;color:#555} .slo{font-size:.85rem;margin-top:.3rem;font-weight:600}
.slo.ok{color:#176b2c} .slo.bad{color:#b00} .slo.none{color:#888;font-weight:400}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:.8rem}
figure{margin:.6rem 0} figure img{display:block;width:100%;height:auto;box-sizing:border-box;border:1px solid #eee}
details{margin:.6rem 0} summary{cursor:pointer;font-weight:600}
@media (max-width:1100px){.grid{grid-template-columns:1fr}.runname{writing-mode:horizontal-tb;transform:none;flex-basis:100%;max-height:none;font-weight:600}.tested dl{grid-template-columns:max-content 1fr}.card .value{font-size:1.35rem}}
"""

SCRIPT = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.documentElement.dataset.figures = ok + "/" + imgs.length;
});
"""


def render_report(analyses: list[Analysis], side: SideBySide | None = None) -> str:
    """The page of `analyses`; several runs side by side with `side` (analysis/side_by_side.py:
    each against the first, and their frontier), computed by the caller."""
    return render(
        "report.html",
        names=[a.run.name for a in analyses],
        css=Markup(CSS + BANNER_CSS),  # the page's own constants, not data
        script=Markup(SCRIPT),
        tested=tested_html([(a.run.name, a.summary) for a in analyses]),
        banners=invalid_banner(analyses) + banners(analyses),  # an invalid run says so first
        headline=headline_strip(analyses),
        spec=spec_table(analyses),  # speculative decoding, when a server reported it
        compare=compare_section(analyses, side.against_first) if side else None,
        sections=_sections(analyses, side),
        summary_rows=summary_rows(analyses),
        cache_tables=cache_tables(analyses),
        whatif=whatif_section(analyses),
        f=template_module("fragments.html"),
    )


def _sections(analyses: list[Analysis], side: SideBySide | None) -> list[Markup]:
    figures = {
        "ttft": figure_html("TTFT", latency_cdf(analyses, "ttft", "TTFT")),
        "tpot": figure_html("TPOT", latency_cdf(analyses, "tpot", "TPOT")),
        "interactivity": figure_html("Interactivity", interactivity(analyses)),
        # beside interactivity: the runs' frontier, or for one run its end-to-end latency
        "beside": figure_html("Pareto", pareto(analyses, side.frontier))
        if side
        else figure_html("E2EL", latency_cdf(analyses, "e2el", "E2EL")),
        "cache_by_turn": figure_html("Cache hit by turn", cache_by_turn(analyses)),
        "cache_by_group": figure_html("Cache hit by agent and endpoint", cache_by_group(analyses)),
        "misses": _miss_figure(analyses),
        "parts": _parts_figure(analyses),
        "tiers": _tier_figure(analyses),
        "load": figure_html("Load held over time", load_held(analyses)),
        "timelines": [
            figure_html(f"Session timeline: {a.run.name}", session_timeline(a, color))
            for a, color in zip(analyses, colors(analyses), strict=False)
        ],
    }
    return [
        render(
            "sections.html",
            fig=figures,
            misses=miss_table(analyses),
            window_note=window_note(analyses),
            tasks=task_tables(analyses),
        )
    ]


def _parts_figure(analyses: list[Analysis]) -> Markup | str:
    """Hit vs ideal by prompt segment and call kind, with their tables."""
    if not has_parts(analyses):
        return ""
    runs = [(a.run.name, a.summary["cache"]) for a in analyses]
    figures = macro("grid")(
        [
            figure_html("Cache hit by prompt segment", cache_parts(analyses, "by_segment")),
            figure_html("Cache hit by call kind", cache_parts(analyses, "by_call_kind")),
        ]
    )
    tables = macro("details")("By prompt segment and call kind", html_tables(runs), opened=True)
    return figures + tables


def _tier_figure(analyses: list[Analysis]) -> Markup | str:
    if not has_tiers(analyses):
        return ""
    used = tiers_used(analyses)
    if len(used) <= 1:
        where = f"the {used[0]} tier" if used else "no tier (no hits)"
        return sentence_html("Cache hits by tier", f"Every cache hit came from {where}.")
    return figure_html("Cache hits by tier", cache_tiers(analyses))


def _miss_figure(analyses: list[Analysis]) -> Markup:
    if analyses and outcome_count(analyses) <= 1:
        hit = any(a.summary.get("cache_hit_rate") for a in analyses)
        text = "Every prompt token was a cache hit." if hit else "No prompt token hit the cache."
        return sentence_html("Miss categories", text)
    return figure_html("Miss categories", miss_categories(analyses))
