"""The report as a person sees it: headless Chromium opens report.html from disk, no network."""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path

import pytest

from harness.analysis.frontier import pareto_frontier
from harness.app.cli import main
from harness.app.reporting import write_report
from harness.report.embed import SVG_POINTS, figure_html
from harness.report.html import SCRIPT
from tests.analysis import browser
from tests.analysis.golden import GOLDEN_TRACE, write_run
from tests.analysis.synthetic import write_synthetic_run

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
needs_chromium = pytest.mark.skipif(
    browser.chromium() is None,
    reason="chromium is not installed (apt-get install chromium; .ci/run does)",
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    runs = [
        write_run(root / "golden", trace=GOLDEN_TRACE),
        write_synthetic_run(root / "base", "base", n_tasks=80, seed=1, endpoints=("e1", "e2")),
        write_synthetic_run(root / "slow", "slow", n_tasks=80, seed=2, ttft_scale=1.3),
    ]
    return write_report(runs, root / "out" / "report.html")


@pytest.mark.slow
def test_report_is_self_contained_and_states_simulated_timings(report):
    text = report.read_text()
    assert "Simulated engine" in text and "golden" in text
    assert "http://" not in text and "https://" not in text and "<link" not in text
    assert len(re.findall(r'src="data:image/(?:svg\+xml|png);base64,', text)) >= 8
    assert "Change against the first run" in text
    assert "requests ok / failed" in text
    assert "slowest of" in text


@pytest.mark.slow
@needs_chromium
def test_report_opens_in_chromium_with_every_figure_and_no_console_errors(report):
    shot = ARTIFACTS / "report.png"
    page = browser.view(report, screenshot=shot, size=(1400, 3600))
    assert page.figures is not None, "the page's load script did not run"
    loaded, total = page.figures
    assert total >= 8 and loaded == total
    assert page.console == []
    assert shot.is_file() and shot.stat().st_size > 10_000
    assert struct.unpack(">II", shot.read_bytes()[16:24]) == (
        1400,
        3600,
    )  # PNG header: width, height


@pytest.mark.slow
@needs_chromium
def test_headline_strip_holds_the_four_numbers_and_every_figure_has_data(report):
    dom = browser.view(report).dom
    strips = re.findall(r'<div class="strip" data-run="([^"]+)">(.*?)</div></div></div>', dom, re.S)
    assert [name for name, _ in strips][:1] == ["golden"] and len(strips) == 3
    for _, strip in strips:
        values = dict(
            re.findall(
                r'data-metric="(\w+)"><div class="label">[^<]*</div><div class="value">([^<]*)<',
                strip,
            )
        )
        assert list(values) == ["ttft_p90", "interactivity_p90", "tpgs", "cache_hit", "misses"]
        assert all(re.search(r"\d", v) for v in values.values()), values
    points = [int(n) for n in re.findall(r'<figure data-points="(\d+)"', dom)]
    assert len(points) >= 8 and min(points) > 0


@pytest.mark.slow
def test_headline_strip_gives_slo_verdicts(tmp_path):
    run = write_synthetic_run(tmp_path / "r", "r", n_tasks=20, seed=3)
    (run / "scenario.yaml").write_text("slos: {ttft_p90: 1ms, interactivity_p90: 1}\n")
    text = write_report([run], tmp_path / "report.html").read_text()
    strip = text[text.index('<div class="strip"') : text.index("<h2>")]
    assert "SLO &lt;= 0.001 s: MISSED" in strip and "SLO &gt;= 1 tok/s/user: met" in strip


@pytest.mark.slow
@needs_chromium
def test_the_browser_check_catches_a_broken_page(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(
        f"<!DOCTYPE html><html><head><script>{SCRIPT}</script></head><body>"
        '<img src="missing.png"><script>console.error("boom")</script></body></html>'
    )
    page = browser.view(broken)
    assert page.figures == (0, 1)
    assert any("boom" in line for line in page.console)


@pytest.mark.slow
def test_cli_report_defaults_to_the_run_folder(tmp_path, capsys):
    run = write_run(tmp_path / "golden")
    assert main(["report", str(run)]) == 0
    assert (run / "report.html").is_file() and "wrote" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_report_json_names_what_it_wrote(tmp_path, capsys):
    run = write_run(tmp_path / "golden")
    assert main(["report", str(run), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {
        "report": str(run / "report.html"),
        "kind": "run",
        "runs": [str(run)],
    }
    assert main(["report", "--trend", str(run), "-o", str(tmp_path / "t.html"), "--json"]) == 0
    trend = json.loads(capsys.readouterr().out)
    assert trend["report"] == str(tmp_path / "t.html") and trend["kind"] == "trend"
    assert trend["runs"] == [str(run)] and isinstance(trend["regressions"], list)
    assert trend["exit_code"] == 0 and (tmp_path / "t.html").is_file()


def test_pareto_frontier_keeps_points_nothing_beats_on_both_axes():
    # (interactivity, tpgs): (2, 5) is beaten by (3, 6); (1, 9), (3, 6), (5, 2) trade off.
    points = [(1, 9), (2, 5), (3, 6), (5, 2), (4, 1)]
    assert pareto_frontier(points) == [0, 2, 3]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["all failed", "no records"])
def test_runs_without_ok_requests_still_analyze_and_report(tmp_path, kind):
    from harness.analysis.summary import analyze_run
    from tests.analysis.golden import GOLDEN_RECORDS

    failed = [
        dict(r, status="error", error={"class": "HTTPError", "message": "500"})
        for r in GOLDEN_RECORDS
    ]
    run = write_run(tmp_path / "r", records=failed if kind == "all failed" else [])
    summary = analyze_run(run)
    assert (
        summary["requests_ok"] == 0 and summary["ttft_s"]["count"] == 0 and summary["tpgs"] is None
    )
    assert summary["requests_failed"] == (6 if kind == "all failed" else 0)
    text = write_report([run], tmp_path / "report.html").read_text()
    assert "requests ok / failed" in text
    assert "slowest of" in text


@pytest.mark.slow
def test_cache_card_shows_the_servers_own_counters_when_scraped(tmp_path):
    import json

    run = write_synthetic_run(tmp_path / "r", "r", n_tasks=10, seed=4)
    (run / "summary.json").write_text(
        json.dumps({"server_cache": {"hit_rate": 0.5, "queries": 2, "hits": 1}})
    )
    text = write_report([run], tmp_path / "report.html").read_text()
    card = text[text.index('data-metric="cache_hit"') :]
    assert "server /metrics 0.500" in card[:400]


@pytest.mark.parametrize("points, kind", [(100, "svg+xml"), (SVG_POINTS + 1, "png")])
def test_a_figure_comes_as_svg_unless_it_drew_more_than_the_limit(points, kind):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.6, 3.6), dpi=100)
    ax = fig.subplots()
    ax.plot(range(points), range(points), label="requests")
    html = str(figure_html("a figure", fig))
    assert f'data-points="{points}"' in html
    assert re.findall(r'src="data:image/([a-z+]+);base64,', html) == [kind]
    if kind == "svg+xml":  # text as text (searchable), with no date: the same page every time
        svg = base64.b64decode(html.split("base64,")[1].split('"')[0]).decode()
        assert "<text" in svg and "dc:date" not in svg


def test_a_page_is_written_when_the_template_cache_cannot_be(tmp_path, monkeypatch):
    """jinja2's compiled-template cache in an unwritable temp folder: skipped, not an error."""
    import tempfile

    from harness.report import jinja

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    jinja._environment.cache_clear()
    try:
        assert jinja._environment().bytecode_cache is None
        assert "<td>1</td>" in jinja.macro("table")(["n"], [[1]])
    finally:
        monkeypatch.undo()
        jinja._environment.cache_clear()
