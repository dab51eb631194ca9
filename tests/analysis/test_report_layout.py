"""The report as a browser lays it out, at 1400 and 800 px: no legend or title runs off its
figure (no ink on an image's outermost pixels), no figure wider than its column, text drawn at a
readable scale; and the card and the figures take their colours from one table."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from harness.analysis.loader import load_run
from harness.analysis.side_by_side import side_by_side
from harness.analysis.summary import analyze
from harness.report import colors
from harness.report.embed import figure_html
from harness.report.headline import headline_strip
from harness.report.html import render_report
from harness.report.plots.cache import miss_categories
from harness.report.plots.cache_tiers import cache_tiers
from tests.analysis import browser
from tests.analysis.test_report_screen import endpoint_run

needs_chromium = pytest.mark.skipif(
    browser.chromium() is None,
    reason="chromium is not installed (apt-get install chromium; .ci/run does)",
)
MISSES = {  # every category at once, the longest label among them
    "cold": 900.0, "granularity": 300.0, "prompt_cap": 40.0, "in_flight": 80.0, "misrouted": 60.0,
    "last_block": 120.0, "no_hits": 0.0, "evicted": 200.0, "unexplained": 30.0, "unreported": 0.0,
}  # fmt: skip
TIERS = {"hit_rate": {"device": 0.5, "cpu": 0.3, "disk": 0.05, "remote": 0.02}}


def crowded(tmp_path) -> list:
    """Two runs with long names, every miss category and every tier: the most a legend holds."""
    out = []
    for name in ("nightly-2026-12-01-concurrency-6", "nightly-2026-12-02-concurrency-6-rerun"):
        a = analyze(load_run(endpoint_run(tmp_path / name, name)))
        prompt = 2 * sum(MISSES.values())  # half of it hit
        a.summary["cache"].update(
            miss_tokens=dict(MISSES),
            missed_tokens=sum(MISSES.values()),
            prompt_tokens=prompt,
            miss_share_of_prompt_tokens={k: v / prompt for k, v in MISSES.items()},
        )
        a.summary["cache"]["tiers"] = TIERS
        out.append(a)
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layout")
    path = tmp / "report.html"
    analyses = crowded(tmp)
    path.write_text(render_report(analyses, side_by_side(analyses)), encoding="utf-8")
    return path


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 800])
def test_no_legend_or_title_runs_off_its_figure(page, width):
    found = browser.layout(page, width)
    assert found["width"] == width
    names = {f["name"] for f in found["figures"]}
    assert {"Miss categories", "Cache hits by tier", "Load held over time"} <= names, names
    cut = [(f["name"], f["edgeInk"]) for f in found["figures"] if f["edgeInk"]]
    assert cut == [], f"ink on a figure's edge at {width} px: {cut}"
    wider = [f["name"] for f in found["figures"] if f["overflow"]]
    assert wider == [] and not found["pageOverflow"]
    small = [(f["name"], round(f["scale"], 2)) for f in found["figures"] if f["scale"] < 0.75]
    assert small == [], f"figures shrunk below readable at {width} px: {small}"
    assert not any(c["overflow"] for c in found["cards"])


@needs_chromium
@pytest.mark.slow
def test_the_check_finds_a_legend_cut_at_the_edge(tmp_path):
    """The same check on a figure whose legend hangs past its right edge: it must be caught."""
    fig, ax = plt.subplots(figsize=(6.6, 3.6), dpi=100, layout="constrained")
    ax.plot([0, 1], [0, 1], label="a legend entry long enough to be cut at the figure's edge")
    ax.legend(loc="center left", bbox_to_anchor=(0.9, 0.5))
    path = tmp_path / "cut.html"
    path.write_text(f"<!DOCTYPE html><html><body>{figure_html('cut', fig)}</body></html>")
    found = browser.layout(path, 1400)
    assert found["figures"][0]["edgeInk"] > 0


@pytest.mark.slow
def test_card_and_figures_colour_each_category_from_one_table(tmp_path):
    analyses = crowded(tmp_path)
    strip = headline_strip(analyses[:1])
    assert 'data-category="hit"' in strip  # hits in the card's legend too
    for key in ("hit", "cold", "granularity", "in_flight", "evicted"):
        assert f'data-category="{key}"><i style="background:{colors.outcome_color(key)}' in strip

    fig = miss_categories(analyses)
    legend = fig.legends[0]
    drawn = {
        t.get_text(): h.get_facecolor()
        for t, h in zip(legend.texts, legend.legend_handles, strict=True)
    }
    from matplotlib.colors import to_rgba

    from harness.report.misses import label

    assert "hit" in drawn
    for key in ("hit", "cold", "granularity", "in_flight", "evicted"):
        assert tuple(drawn[label(key)]) == to_rgba(colors.outcome_color(key))
    plt.close(fig)
    fig = cache_tiers(analyses)
    texts = [t.get_text() for t in fig.legends[0].texts]
    assert texts == ["hit: device", "hit: cpu", "hit: disk", "hit: remote", "ideal"]
    bars = [p.get_facecolor() for p in fig.axes[0].patches]
    assert to_rgba(colors.tier_color("cpu")) in [tuple(b) for b in bars]
    plt.close(fig)


def test_a_legend_below_fits_the_narrow_drawing_of_a_wide_figure():
    # the quickstart's "Load held" at 800 px: six entries in one row at 13.6 in, still one row
    # at 7.6 in, its first handle drawn left of the image
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from harness.report.plots.base import WIDE, legend_below
    from harness.report.plots.narrow import narrow_layout

    fig = Figure(figsize=(WIDE, 4), dpi=100, layout="constrained")
    fig.subplots().plot([0, 1], [0, 1])
    names = ["tasks in flight", "requests in flight", "target", "server hit", "ideal hit"]
    legend_below(fig, [Line2D([], []) for _ in names + ["x"]], [*names, "measured window"])
    assert narrow_layout(fig)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    box, (legend,) = fig.bbox, fig.legends
    inside = legend.get_window_extent(renderer)
    assert box.x0 <= inside.x0 and inside.x1 <= box.x1, (inside, box)
