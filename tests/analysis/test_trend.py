"""`harness report --trend`: five nightly runs, one with a regression injected; exactly that one is marked."""

from __future__ import annotations

import re

import pytest

from harness.analysis.compare.trend import trend
from harness.cli import main
from harness.report.trend import write_trend
from tests.analysis.golden import MANIFEST, write_run
from tests.analysis.synthetic import synthetic_records

SLOW_NIGHT = 3  # its time to first token is 1.4x the others'


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
    for night in (4, 2, 5, 1, 3):  # written out of order: the trend orders by start time
        run = _nightly(root, night)
        if night != 1:  # as `harness run` leaves them; night 1's report the trend writes itself
            (run / "report.html").write_text("<html>report</html>")
    return root


@pytest.mark.slow
def test_trend_marks_exactly_the_injected_regression(nightly):
    result, _ = trend([str(nightly / "nightly-*")])
    assert [p.run for p in result.points] == [f"nightly-2026-11-0{n}" for n in range(1, 6)]
    marked = {run for run, _ in result.regressions}
    assert marked == {f"nightly-2026-11-0{SLOW_NIGHT}"}
    assert "ttft_p90" in result.points[SLOW_NIGHT - 1].regressions
    # The night after recovers: better, not a regression; the first night has nothing to compare to.
    assert result.points[SLOW_NIGHT].changes["ttft_p90"].verdict == "better"
    assert result.points[0].changes == {}


@pytest.mark.slow
def test_trend_page_links_every_point_to_its_run_report(nightly, tmp_path):
    out, _ = write_trend([str(nightly / "nightly-*")], tmp_path / "trend.html")
    text = out.read_text()
    assert (
        not re.search(r'(src|href)="https?:', text) and "<link" not in text and "<img" not in text
    )
    for n in range(1, 6):
        run = nightly / f"nightly-2026-11-0{n}"
        assert (run / "report.html").is_file()
        assert (run / "report.html").stat().st_size > 10_000 if n == 1 else True
        link = re.escape(f"nightly-2026-11-0{n}/report.html")
        assert (
            len(re.findall(rf'<a [^>]*href="[^"]*{link}"', text)) >= 2
        )  # a figure point and the table
    assert text.count('class="bad"') == len(trend([str(nightly / "nightly-*")])[0].regressions)
    assert "1 significant regression" not in text or "nightly-2026-11-03" in text


@pytest.mark.slow
def test_cli_report_trend(nightly, tmp_path, capsys):
    assert (
        main(["report", "--trend", str(nightly / "nightly-*"), "-o", str(tmp_path / "t.html")]) == 0
    )
    assert "regression" in capsys.readouterr().out
