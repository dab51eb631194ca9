"""Sweep roll-ups: the saturation point and the P/D plan from two saturation runs."""

import json

import pytest

from harness.analysis.sweep import plan_pd, saturation_point
from harness.errors import RunFolderError


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, 2.0, 3.0, 3.05, 3.0], 2),  # growth stops after the third point
        ([1.0, 2.0, 1.5, 2.02], 1),  # a dip does not hide a later plateau within 5 %
        ([1.0, 2.0, 4.0], 2),  # still growing: the last point (the sweep says "not reached")
        ([None, 1.0, 1.0], 1),  # a point that produced nothing is skipped
    ],
)
def test_saturation_point(values, expected):
    assert saturation_point(values) == expected


def _sweep(tmp_path, name, rate, reached=True):
    d = tmp_path / name
    d.mkdir()
    sat = {"point": "concurrency=4", "requests_per_s": rate, "reached": reached}
    (d / "sweep.json").write_text(json.dumps({"points": [], "saturation": sat}))
    return d


def test_plan_pd_is_decode_rate_over_prefill_rate(tmp_path):
    plan = plan_pd(_sweep(tmp_path, "p", 10.0), _sweep(tmp_path, "d", 4.0))
    assert plan["p_to_d"] == pytest.approx(0.4)
    assert plan["prefill_source"] == "saturation at concurrency=4"


def test_plan_pd_says_when_saturation_was_not_reached(tmp_path):
    plan = plan_pd(_sweep(tmp_path, "p", 10.0), _sweep(tmp_path, "d", 4.0, reached=False))
    assert "lower bound" in plan["decode_source"]


def test_plan_pd_needs_run_folders(tmp_path):
    with pytest.raises(RunFolderError, match="sweep.json nor summary.json"):
        plan_pd(tmp_path, tmp_path)
