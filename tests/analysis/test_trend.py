"""`harness report --trend`: seven nightly runs, one with a regression injected; exactly that one is
marked; a night with no history is never a regression; another configuration is another series."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness.analysis.compare.trend import trend
from harness.app.cli import main
from harness.app.reporting import write_trend
from harness.report.trend import TREND_CSS
from tests.analysis import browser
from tests.analysis.golden import MANIFEST, write_run
from tests.analysis.synthetic import synthetic_records

SLOW_NIGHT = 5  # its time to first token is 1.4x the others'


def _nightly(root, night: int):
    manifest = {
        **MANIFEST,
        "run_id": f"nightly-2026-11-0{night}",
        "simulated": False,
        "n_gpus": 1,
        "started_at": f"2026-11-0{night}T02:00:00Z",
    }
    records = synthetic_records(
        n_tasks=60, seed=night, ttft_scale=1.4 if night == SLOW_NIGHT else 1.0
    )
    return write_run(root / f"nightly-2026-11-0{night}", records, manifest)


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    for night in (4, 2, 7, 6, 5, 1, 3):  # written out of order: the trend orders by start time
        run = _nightly(root, night)
        if night != 1:  # as `harness run` leaves them; night 1's report the trend writes itself
            (run / "report.html").write_text("<html>report</html>")
    return root


@pytest.mark.slow
def test_trend_marks_exactly_the_injected_regression(nightly):
    result, _ = trend([str(nightly / "nightly-*")])
    assert [p.run for p in result.points] == [f"nightly-2026-11-0{n}" for n in range(1, 8)]
    marked = {run for run, _ in result.regressions}
    assert marked == {f"nightly-2026-11-0{SLOW_NIGHT}"}
    assert "ttft_p90" in result.points[SLOW_NIGHT - 1].regressions
    assert result.points[SLOW_NIGHT - 1].verdict == "regressed"
    # Night 2 has no history: at most inconclusive. The night after the slow one is not a
    # regression, and the slow night is left out of its history.
    assert result.points[1].verdict in ("inconclusive", "no change detected")
    assert result.points[SLOW_NIGHT].verdict != "regressed"
    assert ("nightly-2026-11-05", "itself judged regressed") in result.points[6].left_out
    assert result.points[0].changes == {} and result.points[0].verdict is None
    assert len(result.series) == 1


@pytest.mark.slow
def test_trend_page_links_every_point_to_its_run_report(nightly, tmp_path):
    out, _ = write_trend([str(nightly / "nightly-*")], tmp_path / "trend.html")
    text = out.read_text()
    assert (
        not re.search(r'(src|href)="https?:', text) and "<link" not in text and "<img" not in text
    )
    for n in range(1, 8):
        run = nightly / f"nightly-2026-11-0{n}"
        assert (run / "report.html").is_file()
        assert (run / "report.html").stat().st_size > 10_000 if n == 1 else True
        link = re.escape(f"nightly-2026-11-0{n}/report.html")
        assert (
            len(re.findall(rf'<a [^>]*href="[^"]*{link}"', text)) >= 2
        )  # a figure point and the table
    assert text.count('class="bad"') == len(trend([str(nightly / "nightly-*")])[0].regressions)
    assert "1 regression(s)" in text and "nightly-2026-11-05 TTFT p90" in text


@pytest.mark.slow
def test_cli_report_trend(nightly, tmp_path, capsys):
    code = main(["report", "--trend", str(nightly / "nightly-*"), "-o", str(tmp_path / "t.html")])
    out = capsys.readouterr().out
    assert "regression: nightly-2026-11-05 TTFT p90" in out and "trend verdict:" in out
    assert code in (0, 4)  # the latest night (7) is judged, not the slow one before it
    assert (
        main(
            [
                "report",
                "--trend",
                str(nightly / "nightly-2026-11-01"),
                "-o",
                str(tmp_path / "o.html"),
            ]
        )
        == 0
    )
    assert "nothing to trend" in capsys.readouterr().out


NIGHTS = Path(__file__).parent / "fixtures" / "nightly"


@pytest.mark.slow
def test_recorded_nights_same_config_night_2_is_no_regression_starved_night_its_own_series(
    tmp_path,
):
    runs = []
    for n in range(1, 5):  # copies: the trend writes each run's report.html beside it
        runs.append(tmp_path / f"night{n}")
        shutil.copytree(NIGHTS / f"night{n}", runs[-1])
    result, _ = trend([str(r) for r in runs])
    assert [p.series for p in result.points] == [0, 0, 0, 1]
    assert result.points[1].verdict != "regressed" and result.regressions == []
    # The first of a later series has nothing like it before it: not comparable, never green.
    assert result.points[3].verdict == "not comparable" and result.exit_code == 5
    words = "target.engine.options.max_num_batched_tokens 2048 vs 32"
    assert f"starts a new series: {words} (the run before it" in result.points[3].why_not_comparable
    assert result.series[1] == f"series 2: {words} (series 1 vs series 2)"
    out, _ = write_trend([str(r) for r in runs], tmp_path / "trend.html")
    assert "series 2" in out.read_text()


@pytest.mark.slow
@pytest.mark.skipif(browser.chromium() is None, reason="chromium is not installed (.ci/run has it)")
def test_trend_figures_are_drawn_for_the_page_width(nightly, tmp_path):
    out, result = write_trend([str(nightly / "nightly-*")], tmp_path / "trend.html")
    text = out.read_text()
    assert text.count('<div class="narrow"><svg') == 1  # one figure, a panel per metric
    assert all(label in text for label in result.labels.values())
    assert "<figcaption>" not in text  # the title is in the figure
    for width in (1400, 800):
        found = browser.layout(out, width, script=browser.TREND_SCRIPT)
        assert not found["pageOverflow"], (width, found)
        assert len(found["figures"]) == 1
        for figure in found["figures"]:  # one drawing shows, at about its own size (the wide
            assert figure["shown"] == 1, (width, figure)  # one at 800 px would be 0.6)
            assert 0.9 < figure["scale"][0] <= 1.1, (width, figure)
    # the control: without the narrow drawings' rule, 800 px shows the wide one shrunk
    wide_only = tmp_path / "wide-only.html"
    wide_only.write_text(text.replace(TREND_CSS, ".trend svg{max-width:100%;height:auto}"))
    found = browser.layout(wide_only, 800, script=browser.TREND_SCRIPT)
    assert all(f["scale"][0] < 0.7 for f in found["figures"]), found  # the wide one, shrunk
