"""`harness capacity`: the search finds the largest concurrency that meets, and an SLO is met,
missed or undecided by its bootstrap interval over tasks."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.run import load_run
from harness.analysis.slo import parse_slo
from harness.analysis.summary import analyze
from harness.capacity import _search, judge
from harness.cli import main
from tests.analysis.synthetic import write_synthetic_run


@pytest.mark.parametrize("limit", [0, 1, 5, 6, 8, 100, 300])
def test_the_search_finds_the_largest_concurrency_that_meets(limit):
    calls = []

    def meets(c):
        calls.append(c)
        return c <= limit

    assert _search(meets, 256, resolution=0) == min(limit, 256)
    assert len(calls) == len(set(calls))  # no point is tried twice
    assert len(calls) <= 2 * int(np.log2(256)) + 2


def test_the_bisection_stops_within_its_resolution():
    calls = []
    found = _search(lambda c: calls.append(c) or c <= 150, 256, resolution=0.1)
    assert 150 * 0.9 <= found <= 150 and len(calls) <= 14


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    return analyze(load_run(write_synthetic_run(tmp_path_factory.mktemp("r") / "r", "r", seed=3)))


def test_an_slo_is_met_missed_or_undecided_by_its_interval(analysis):
    p90 = float(np.percentile(analysis.per_request["ttft"].dropna(), 90))
    loose, tight, edge = (parse_slo("ttft_p90", f"{v}s") for v in (2 * p90, 0.5 * p90, p90))
    assert judge([analysis], loose).met is True
    assert judge([analysis], tight).met is False
    on_edge = judge([analysis], edge)
    assert on_edge.met is None and on_edge.interval[0] < p90 < on_edge.interval[1]


def test_interactivity_is_a_lower_bound(analysis):
    value = judge([analysis], parse_slo("interactivity_p90", 1)).value
    assert judge([analysis], parse_slo("interactivity_p90", value / 2)).met is True
    assert judge([analysis], parse_slo("interactivity_p90", value * 2)).met is False


def test_capacity_refuses_a_scenario_without_percentile_slos(tmp_path, capsys):
    code = main(
        ["capacity", "scenarios/quickstart.yaml", "--set", "slos={}", "-o", str(tmp_path / "c")]
    )
    assert code == 2
    assert "capacity needs percentile SLOs" in capsys.readouterr().err


def test_the_page_draws_each_slo_and_sets_the_failing_point_beside_the_last_met(tmp_path):
    from harness.analysis.summary import analyze_run
    from harness.report.capacity import write_capacity_report

    runs = {}
    for c, scale in ((4, 1.0), (8, 3.0)):
        runs[c] = write_synthetic_run(tmp_path / f"c{c}", f"c{c}", seed=c, ttft_scale=scale)
        analyze_run(runs[c])

    def point(c, met, value):
        figure = {
            "value": value,
            "interval": [value * 0.9, value * 1.1],
            "bound": 0.5,
            "upper": True,
        }
        return {
            "concurrency": c,
            "runs": [str(runs[c])],
            "met": met,
            "decided_by": "interval",
            "slos": {"ttft_p90": {**figure, "met": met}},
        }

    result = {
        "capacity": 4,
        "slos": {"ttft_p90": 0.5},
        "points": [point(4, True, 0.3), point(8, False, 0.9)],
    }
    page = write_capacity_report(result, tmp_path).read_text()
    assert "Capacity: 4 concurrent tasks" in page and page.count("<img") == 1
    why = page[page.index("Why the first failing point failed") :]
    assert "4 tasks (met)" in why and "8 tasks (missed)" in why and "TTFT p90" in why
