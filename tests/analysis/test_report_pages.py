"""The pages as a person sees them, in headless Chromium at 1400 and 800 px: the quickstart's report,
an A/B page and a trend page of three runs at two loads. Every figure fills its column (within a
few pixels) at a readable scale, no legend's box overlaps a data line's (read from the SVG the
page draws), no headline card wraps its value, a configuration row is marked only where the
configurations differ, and the trend's series are named by their load. Screenshots of each page
at each width go to test-artifacts/pages/."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.compare.series_names import series_names
from harness.analysis.compare.trend import trend
from harness.analysis.loader import load_run
from harness.analysis.side_by_side import side_by_side
from harness.analysis.summary import analyze
from harness.app.cli import main
from harness.report import embed
from harness.report.embed import figure_html
from harness.report.html import render_report
from harness.report.trend import render_trend
from tests.analysis import browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "pages"
WIDTHS = (1400, 800)
SLACK_PX = 4  # a figure may be this much narrower than its column (borders, rounding)
needs_chromium = pytest.mark.skipif(
    browser.chromium() is None,
    reason="chromium is not installed (apt-get install chromium; .ci/run does)",
)


def _simulate(out: Path, *sets: str) -> Path:
    """The quickstart on simulated time (the engine's cost model, a virtual clock): seconds."""
    argv = ["simulate", str(ROOT / "scenarios" / "quickstart.yaml"), "-o", str(out), "--quiet"]
    assert main([*argv, "--set", "load.max_duration_s=20", *(f"--set={s}" for s in sets)]) == 0
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The three pages, every figure as SVG (the legend check reads the SVG; above
    SVG_POINTS a figure is a PNG of the same layout)."""
    tmp = tmp_path_factory.mktemp("pages")
    runs = [
        _simulate(tmp / "qs-6a"),
        _simulate(tmp / "qs-6b"),
        _simulate(tmp / "qs-3", "load.concurrency=3"),
    ]
    patch = pytest.MonkeyPatch()
    patch.setattr(embed, "SVG_POINTS", 10**9)
    try:
        one, two = (analyze(load_run(r)) for r in runs[:2])
        out = {"quickstart": tmp / "quickstart.html", "ab": tmp / "ab.html"}
        out["quickstart"].write_text(render_report([one]), encoding="utf-8")
        out["ab"].write_text(render_report([one, two], side_by_side([one, two])), "utf-8")
        result, analyses = trend(runs)
        names = series_names(analyses, [p.series for p in result.points])
        out["trend"] = tmp / "trend.html"
        out["trend"].write_text(render_trend(result, tmp, names), encoding="utf-8")
    finally:
        patch.undo()
    return out


@pytest.fixture(scope="module")
def seen(pages) -> dict[tuple[str, int], dict]:
    """Each page laid out at each width (and its screenshot saved)."""
    return {
        (name, width): browser.geometry(page, width, ARTIFACTS / f"{name}-{width}.png")
        for name, page in pages.items()
        for width in WIDTHS
    }


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize("name", ["quickstart", "ab", "trend"])
@pytest.mark.parametrize("width", WIDTHS)
def test_every_figure_fills_its_column_and_no_legend_covers_the_data(seen, name, width):
    found = seen[(name, width)]
    assert "error" not in found, found
    assert found["width"] == width and not found["pageOverflow"]
    figures = found["figures"]
    assert figures, found
    narrow = [
        (f["name"], f["column"], f["width"]) for f in figures if f["width"] < f["column"] - SLACK_PX
    ]
    assert narrow == [], f"figures narrower than their column at {width} px: {narrow}"
    unreadable = [
        (f["name"], round(f["scale"], 2)) for f in figures if not 0.75 <= f["scale"] <= 1.3
    ]
    assert unreadable == [], f"figures drawn at an unreadable scale at {width} px: {unreadable}"
    covered = [(f["name"], f["legend"]) for f in figures if f["legend"] and f["legend"]["hits"]]
    assert covered == [], f"a legend over the data at {width} px: {covered}"
    assert found["wrapped"] == [], f"headline values wrapped at {width} px: {found['wrapped']}"
    assert (ARTIFACTS / f"{name}-{width}.png").stat().st_size > 10_000


@needs_chromium
@pytest.mark.slow
def test_ab_of_one_configuration_marks_no_row_and_the_trend_names_its_loads(seen):
    assert seen[("ab", 1400)]["differ"] == []  # tasks and duration differ: outcomes, not setup
    assert seen[("trend", 1400)]["key"] == ["concurrency 6", "concurrency 3", "a regression"]


@needs_chromium
@pytest.mark.slow
def test_the_checks_catch_a_legend_on_the_data_and_a_figure_short_of_its_column(tmp_path):
    """The same checks on a page built to fail them: a legend inside the axes, over its line,
    and a figure drawn at its natural width in a wider column."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.6, 3.6), dpi=100, layout="constrained")
    ax = fig.subplots()
    ax.plot(range(20), [i % 5 for i in range(20)], label="a line under its legend")
    ax.legend(loc="center")
    style = "<style>figure{margin:0;width:900px} figure img{max-width:100%}</style>"
    page = tmp_path / "bad.html"
    page.write_text(f"<!DOCTYPE html><html>{style}<body>{figure_html('bad', fig)}</body></html>")
    found = browser.geometry(page, 1400)
    (bad,) = found["figures"]
    assert bad["legend"]["hits"] > 0
    assert bad["width"] < bad["column"] - SLACK_PX
