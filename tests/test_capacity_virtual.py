"""`harness capacity --simulate`: the exact search (one run a point), its answer stable, and the
fleet table's shape (`--replicas`, `--routing`)."""

import json
from pathlib import Path

import pytest

from harness.analysis.capacity import MET, MISSED
from harness.app.capacity.fleet import fleet
from harness.app.capacity.virtual import Point, Search, capacity_virtual, missed_slos, most_points
from harness.app.cli import main
from harness.app.commands.run import SIMULATE_SETS
from harness.app.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def _threshold(limit: int, seen: list[int]):
    def measure(c: int) -> Point:
        seen.append(c)
        return Point(c, MET if c <= limit else MISSED, {}, None, c, c, 0.0, "")

    return measure


def test_the_search_doubles_then_bisects_to_the_last_point_met():
    seen: list[int] = []
    assert Search(_threshold(19, seen), 256).run() == 19
    assert seen == [1, 2, 4, 8, 16, 32, 24, 20, 18, 19]  # each point once: a run is exact


def test_a_search_from_a_guess_steps_down_to_a_bracket():
    seen: list[int] = []
    assert Search(_threshold(19, seen), 256).run(guess=40, factor=1.25) == 19
    assert seen[:4] == [40, 32, 25, 20]


def test_no_point_met_and_the_ceiling_met():
    assert Search(_threshold(0, []), 256).run() is None
    assert Search(_threshold(1000, []), 64).run() == 64


def test_the_progress_bound_holds_every_search():
    for ceiling in (1, 2, 3, 7, 8, 100, 256, 600):
        for limit in range(0, ceiling + 2, max(1, ceiling // 40)):
            seen: list[int] = []
            Search(_threshold(limit, seen), ceiling).run()
            assert len(seen) <= most_points(ceiling), (ceiling, limit, seen)


def _scenario(name: str, *sets: str):
    return load_scenario(ROOT / "scenarios" / name, [*SIMULATE_SETS, *sets])


@pytest.mark.slow  # two exact searches: ~9 CPU-s
def test_the_capacity_on_the_virtual_clock_is_the_same_twice(tmp_path):
    scenario = _scenario("capacity-sim.yaml")
    runs = [
        capacity_virtual(scenario, tmp_path / side, max_concurrency=8, point_s=4, quiet=True)
        for side in ("a", "b")
    ]
    first, second = ({k: v for k, v in r.items() if k != "wall_s"} for r in runs)
    for result in (first, second):
        for p in result["points"]:
            p.pop("wall_s"), p.pop("path")
    assert first == second
    assert first["capacity"] is not None and first["modelled"] is True
    saved = json.loads((tmp_path / "a" / "capacity.json").read_text())
    assert saved["capacity"] == first["capacity"]
    assert "not measured" in (tmp_path / "a" / "capacity.md").read_text()


@pytest.mark.slow  # a search per replica count and policy: ~8 CPU-s
def test_the_fleet_table_has_a_row_per_replica_count_and_a_column_per_policy(tmp_path):
    scenario = _scenario("fleet.yaml")
    policies = ["round_robin", "session_sticky"]
    result = fleet(
        scenario,
        tmp_path,
        replicas=[1, 2],
        policies=policies,
        point_s=3,
        max_concurrency=8,
        quiet=True,
    )
    cells = {(c["replicas"], c["routing"]) for c in result["cells"]}
    assert cells == {(n, p) for n in (1, 2) for p in policies}
    for cell in result["cells"]:
        assert cell["agents_at_slo"] is not None and 0 < cell["cache_hit_rate"] <= 1
    table = (tmp_path / "fleet.md").read_text()
    assert "Modelled, not measured" in table
    assert "| 1 |" in table and "| 2 |" in table and "round_robin: agents / hit" in table
    assert json.loads((tmp_path / "fleet.json").read_text())["modelled"] is True


def test_the_verb_refuses_an_unknown_policy_in_one_line(tmp_path, capsys):
    from harness.app.cli import main

    scenario = str(ROOT / "scenarios" / "fleet.yaml")
    argv = ["capacity", scenario, "--simulate", "--replicas", "1,2", "--routing", "random"]
    code = main([*argv, "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "longest_prefix" in err


@pytest.mark.slow
def test_a_search_that_meets_its_ceiling_says_at_least_and_json_holds_it(tmp_path, capsys):
    args = ["capacity", "scenarios/capacity-sim.yaml", "--simulate", "--point-s", "30"]
    code = main([*args, "--max-concurrency", "4", "-o", str(tmp_path / "c"), "--format", "json"])
    captured = capsys.readouterr()
    result = json.loads(captured.out)  # the one JSON object; the points' lines went to stderr
    assert code == 0 and result["capacity"] == 4 and result["at_ceiling"] is True
    assert result["band_text"].startswith("at least 4: every point up to the search's ceiling")
    assert "raise --max-concurrency (now 4)" in result["band_text"]
    assert "concurrency 4: met" in captured.err


def test_a_ceiling_the_trace_cannot_hold_is_refused_before_any_run(tmp_path, capsys):
    args = ["capacity", "scenarios/quickstart.yaml", "--simulate", "--max-concurrency", "5000"]
    assert main([*args, "-o", str(tmp_path / "c")]) == 2
    assert "raise workload.sessions" in capsys.readouterr().err
    assert not list((tmp_path / "c").glob("c*"))


@pytest.mark.slow
def test_a_scenario_on_the_virtual_clock_is_searched_exactly_and_past_its_ceiling(tmp_path, capsys):
    """The issue's command: --set clock=virtual without --simulate is the exact search (one run a
    point, its progress counted), says "at least N" at its ceiling, and a raised one goes past."""
    args = ["capacity", "scenarios/quickstart.yaml", *(f"--set={s}" for s in SIMULATE_SETS)]
    args += ["--set", "load.max_duration_s=20", "--format", "json"]  # 1 and 2: too few tasks
    found = {}
    for ceiling in (8, 16):
        out = str(tmp_path / f"at{ceiling}")
        assert main([*args, "--max-concurrency", str(ceiling), "-o", out]) == 0
        captured = capsys.readouterr()
        found[ceiling] = json.loads(captured.out)
        assert f"of at most {most_points(ceiling)} runs" in captured.err
    at8, at16 = found[8], found[16]
    assert at8["clock"] == "virtual" and at8["at_ceiling"] and at8["capacity"] == 8
    assert "at least 8: " in at8["band_text"] and "(now 8)" in at8["band_text"]
    assert [p["concurrency"] for p in at16["points"]] == [1, 2, 4, 8, 16]
    assert at16["capacity"] == 16


def test_a_missed_point_names_the_slo_that_binds():
    from harness.analysis.slo import parse_slos

    slos = parse_slos({"ttft_p90": "1s", "interactivity_p90": 20}, source="slos")
    point = Point(282, MISSED, {"ttft_p90": 1.018, "interactivity_p90": 28.85}, None, 0, 0, 0.0, "")
    assert missed_slos(point, slos) == ["ttft_p90 1.018 > 1"]
    slow = Point(9, MISSED, {"ttft_p90": 0.5, "interactivity_p90": 12.0}, None, 0, 0, 0.0, "")
    assert missed_slos(slow, slos) == ["interactivity_p90 12 < 20"]
