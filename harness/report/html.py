"""`report.html`: one self-contained page (inline CSS, figures as base64 SVG or PNG, no network),
top down by the questions a reader asks.

0. What was tested (target, model, API, load, token scale, device, duration, trace: report/tested.py),
   the caveats (simulated timings, imported runs) and every warning, grouped, in one collapsed banner.
1. The headline strip: TTFT p90, P90 interactivity, TPGS (cached / uncached / output, on which
   device), cache hit vs ideal and where the cache missed, with SLO verdicts (report/headline.py).
2. Where time went: TTFT and TPOT CDFs on log axes with p50/p90/p99 marked; interactivity.
3. What the cache did: hit vs ideal by turn, agent and endpoint; the miss categories.
4. What load was held: tasks and requests in flight vs target and the rolling hit rate vs ideal,
   over time, the analyzer's measured window shaded and the reason it was chosen stated.
5. Sessions: swim lanes with the critical path; the slowest tasks.
6. Full tables, collapsed.

Several runs sit side by side: a strip per run, one line per run in every figure, a
significance-tested comparison of each run against the first. Each figure carries the number of
data points it drew (`data-points`), and a small inline script marks the page once every figure
has decoded (`data-figures="loaded/total"`); the browser test reads both.
"""

from __future__ import annotations

import base64
import io

import matplotlib
from markupsafe import Markup

from harness.analysis.summary_types import Analysis
from harness.report.headline import headline_strip
from harness.report.jinja import macro, render, template_module
from harness.report.notes import banners, miss_note, window_note
from harness.report.plots.layout import fit
from harness.report.plots.narrow import narrow_layout
from harness.report.speculation import spec_table
from harness.report.tables import cache_tables, compare_section, summary_rows, task_tables
from harness.report.tested import tested_html
from harness.report.validity import BANNER_CSS, invalid_banner

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
details.warn{padding:.3rem 1rem} details.warn li{margin:.15rem 0}
.caveat{font-size:.8rem;color:#7a4b00;margin-top:.2rem}
.bar{display:flex;height:.7rem;margin:.35rem 0 .2rem;border-radius:3px;overflow:hidden} .bar span{display:block;height:100%}
ul.legend{list-style:none;padding:0;margin:.1rem 0;font-size:.8rem;display:flex;flex-wrap:wrap;gap:.1rem .7rem}
ul.legend i{display:inline-block;width:.65rem;height:.65rem;margin-right:.25rem;vertical-align:-1px}
.strip{display:flex;gap:.8rem;margin:.6rem 0;align-items:stretch;flex-wrap:wrap}
.runname{writing-mode:vertical-rl;transform:rotate(180deg);font-size:.8rem;color:#555;max-height:8rem;overflow:hidden}
.card{flex:1 1 0;min-width:13rem;border:1px solid #ccd;border-radius:6px;padding:.6rem .9rem;background:#fafbff}
.card .label{font-size:.8rem;text-transform:uppercase;letter-spacing:.04em;color:#556}
.card .value{font-size:1.7rem;font-weight:600;margin:.15rem 0}
.card .sub{font-size:.8rem;color:#555} .slo{font-size:.85rem;margin-top:.3rem;font-weight:600}
.slo.ok{color:#176b2c} .slo.bad{color:#b00} .slo.none{color:#888;font-weight:400}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:.8rem}
figure{margin:.6rem 0} img{max-width:100%;height:auto;border:1px solid #eee}
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


def render_report(analyses: list[Analysis]) -> str:
    many = len(analyses) > 1
    return render(
        "report.html",
        names=[a.run.name for a in analyses],
        css=Markup(CSS + BANNER_CSS),  # the page's own constants, not data
        script=Markup(SCRIPT),
        tested=tested_html([(a.run.name, a.summary) for a in analyses]),
        banners=invalid_banner(analyses) + banners(analyses),  # an invalid run says so first
        headline=headline_strip(analyses),
        spec=spec_table(analyses),  # speculative decoding, when a server reported it
        compare=compare_section(analyses) if many else None,
        sections=_sections(analyses),
        summary_rows=summary_rows(analyses),
        cache_tables=cache_tables(analyses),
        f=template_module("fragments.html"),
    )


def _sections(analyses: list[Analysis]) -> list[Markup]:
    from harness.report.plots.base import interactivity, latency_cdf, pareto, session_timeline
    from harness.report.plots.cache import cache_by_group, cache_by_turn
    from harness.report.plots.load import load_held

    figures = {
        "ttft": _figure_html("TTFT", latency_cdf(analyses, "ttft", "TTFT")),
        "tpot": _figure_html("TPOT", latency_cdf(analyses, "tpot", "TPOT")),
        "interactivity": _figure_html("Interactivity", interactivity(analyses)),
        "pareto": _figure_html("Pareto", pareto(analyses)) if len(analyses) > 1 else "",
        "cache_by_turn": _figure_html("Cache hit by turn", cache_by_turn(analyses)),
        "cache_by_group": _figure_html("Cache hit by agent and endpoint", cache_by_group(analyses)),
        "misses": _miss_figure(analyses),
        "parts": _parts_figure(analyses),
        "tiers": _tier_figure(analyses),
        "load": _figure_html("Load held over time", load_held(analyses)),
        "timelines": [
            _figure_html(f"Session timeline: {a.run.name}", session_timeline(a)) for a in analyses
        ],
    }
    return [
        render(
            "sections.html",
            fig=figures,
            miss_note=miss_note(analyses),
            window_note=window_note(analyses),
            tasks=task_tables(analyses),
        )
    ]


def _parts_figure(analyses: list[Analysis]) -> Markup | str:
    """Hit vs ideal by prompt segment and call kind, with their tables."""
    from harness.report.cache_parts import html_tables
    from harness.report.plots.cache_parts import cache_parts, has_parts

    if not has_parts(analyses):
        return ""
    runs = [(a.run.name, a.summary["cache"]) for a in analyses]
    figures = macro("grid")(
        [
            _figure_html("Cache hit by prompt segment", cache_parts(analyses, "by_segment")),
            _figure_html("Cache hit by call kind", cache_parts(analyses, "by_call_kind")),
        ]
    )
    tables = macro("details")("By prompt segment and call kind", html_tables(runs), opened=True)
    return figures + tables


def _tier_figure(analyses: list[Analysis]) -> Markup | str:
    from harness.report.plots.cache_tiers import cache_tiers, has_tiers, tiers_used

    if not has_tiers(analyses):
        return ""
    used = tiers_used(analyses)
    if len(used) <= 1:
        where = f"the {used[0]} tier" if used else "no tier (no hits)"
        return sentence_html("Cache hits by tier", f"Every cache hit came from {where}.")
    return _figure_html("Cache hits by tier", cache_tiers(analyses))


def _miss_figure(analyses: list[Analysis]) -> Markup:
    from harness.report.plots.cache import miss_categories, outcome_count

    if analyses and outcome_count(analyses) <= 1:
        hit = any(a.summary.get("cache_hit_rate") for a in analyses)
        text = "Every prompt token was a cache hit." if hit else "No prompt token hit the cache."
        return sentence_html("Miss categories", text)
    return _figure_html("Miss categories", miss_categories(analyses))


def data_points(fig) -> int:
    """How many data points a figure drew: line vertices, bars and scatter points over its axes."""
    n = 0
    for ax in fig.axes:
        n += sum(
            len(line.get_xdata())
            for line in ax.get_lines()
            if line.get_label() and not _is_guide(line)
        )
        n += sum(1 for p in ax.patches if p.get_width() and p.get_height())
        n += sum(_collection_points(c) for c in ax.collections)
    return n


def _collection_points(collection) -> int:
    """Scatter points, or for a filled area (a histogram drawn as steps) the vertices of its outline."""
    offsets = len(collection.get_offsets())
    if offsets > 1:
        return offsets
    return sum(len(p.vertices) for p in collection.get_paths()) or offsets


def _is_guide(line) -> bool:
    """axhline/axvline reference lines span the axes in axes coordinates: not data."""
    return line.get_transform() != line.axes.transData


SVG_POINTS = 5_000  # a figure of more data points comes as PNG: its SVG would grow with them


def _figure_html(title: str, fig) -> Markup:
    """The figure as an image, its title in the image only (no caption repeating it); a figure
    wider than a narrow page also comes drawn at that width, so its text stays readable at 800 px.
    SVG when it drew at most SVG_POINTS data points: sharp at any zoom, its text text (found by
    the browser's search, copied as written), and drawn in about half a PNG's time (no glyphs
    rasterised or turned into paths, no zlib); PNG above that, where an SVG's size would follow
    the data."""
    points = data_points(fig)
    draw = _svg if points <= SVG_POINTS else _png
    wide = draw(fig)
    narrow = draw(fig) if narrow_layout(fig) else None
    return macro("figure")(title, points, wide, narrow)


def _svg(fig) -> str:
    fit(fig)  # margins for its text as it is now (a narrow drawing re-wraps its title)
    buf = io.BytesIO()
    # text as text in matplotlib's font stack (DejaVu Sans, then Lucida Grande, Verdana, Arial,
    # sans-serif: as wide or narrower, so a label laid out for it still fits); anchored at its
    # alignment point, so centred and right-aligned labels stay put in another font. Fixed ids
    # and no date: the same analyses give the same page.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "harness"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return _data_uri("svg+xml", buf)


def _png(fig) -> str:
    fit(fig)
    buf = io.BytesIO()
    # zlib level 3, not 6: about a third of the encoding's time for a slightly larger page
    fig.savefig(buf, format="png", pil_kwargs={"compress_level": 3})
    return _data_uri("png", buf)


def _data_uri(kind: str, buf: io.BytesIO) -> str:
    return f"data:image/{kind};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def sentence_html(name: str, text: str) -> Markup:
    """What a figure of one colour would have said, as a sentence in its place."""
    return macro("sentence")(name, text)
