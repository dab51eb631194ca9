"""`harness gate --calibrate`: arms slowed by step_time_scale, the gate's rule replayed on windows
of cycles, and rates that count what the rule said."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.detection_rates import rate
from harness.app.gate.calibration import arm_scenarios, evaluate, replay_rule
from harness.app.gate.loop import GateRun
from harness.app.gate.rule import Rule
from harness.app.scenario import load_scenario
from harness.errors import InputError
from tests.test_gate import Verdict


def cycles(n: int, busy: set[str] = frozenset()) -> list[dict[str, GateRun]]:
    return [
        {
            arm: GateRun(
                arm, f"/x/c{i + 1}-{arm}", 1.0, "complete", f"c{i + 1}-{arm}" not in busy, None, {}
            )
            for arm in ("a", "a2", "s10", "s30")
        }
        for i in range(n)
    ]


class BySlowdown:
    """Regressed once the candidate's runs are s30 and 3 are usable; A/A never decides."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []

    def __call__(self, baseline, candidate, **kw):
        self.calls.append(([Path(p).name for p in baseline], [Path(p).name for p in candidate]))
        slowed = all(Path(p).name.endswith("s30") for p in candidate)
        return Verdict("regressed" if slowed and len(candidate) >= 3 else "inconclusive")


def test_a_window_is_judged_as_the_gate_would_live():
    judge = BySlowdown()
    result = replay_rule(Rule(min_runs=2, max_runs=4), cycles(4), "a", "s30", judge)
    assert judge.calls == [
        (["c1-a", "c2-a"], ["c1-s30", "c2-s30"]),
        (["c1-a", "c2-a", "c3-a"], ["c1-s30", "c2-s30", "c3-s30"]),
    ]
    assert result["verdict"] == "regressed" and result["cycles"] == ["c1", "c2", "c3"]
    assert result["runs_used"] == [3, 3]


def test_busy_runs_in_a_window_are_left_out_and_cost_a_cycle():
    judge = BySlowdown()
    result = replay_rule(
        Rule(min_runs=2, max_runs=4), cycles(4, busy={"c2-s30"}), "a", "s30", judge
    )
    # a pair counts only when both its runs are usable: c2's a run goes with its busy s30
    assert judge.calls[0] == (["c1-a", "c3-a"], ["c1-s30", "c3-s30"])
    assert judge.calls[1] == (["c1-a", "c3-a", "c4-a"], ["c1-s30", "c3-s30", "c4-s30"])
    assert result["cycles"] == ["c1", "c2", "c3", "c4"] and result["runs_used"] == [3, 3]


def test_evaluate_counts_every_kind_both_ways_round():
    doc = evaluate(Rule(min_runs=2, max_runs=3), cycles(4), 2, BySlowdown())
    rates = doc["rates"]
    assert {k: (r["hits"], r["n"]) for k, r in rates.items()} == {
        "false_alarm": (0, 4),
        "detect_+10%": (0, 4),
        "detect_+30%": (4, 4),
    }
    assert rates["false_alarm"]["verdicts"]["inconclusive"] == 4
    assert [c["baseline"] for c in doc["comparisons"]["false_alarm"]] == ["a", "a2", "a", "a2"]


def test_a_rate_carries_its_interval():
    r = rate(
        [{"verdict": "regressed", "runs_used": [3, 3], "smallest_detectable": {"x": 0.2}}]
        + [
            {
                "verdict": "no change detected",
                "runs_used": [3, 3],
                "smallest_detectable": {"x": 0.1},
            }
        ]
        * 19
    )
    assert (r["hits"], r["n"], r["rate"]) == (1, 20, 0.05)
    assert r["interval_95"][0] < 0.05 < r["interval_95"][1] and r["interval_95"][1] < 0.3
    assert r["smallest_detectable_median"] == {"x": 0.1}


def test_the_arms_differ_only_in_step_time_scale():
    arms = arm_scenarios(load_scenario("scenarios/quickstart.yaml"))
    scales = {k: s.target.engine.options["step_time_scale"] for k, s in arms.items()}
    assert scales == {"a": 1.0, "a2": 1.0, "s10": 1.1, "s30": 1.3}
    assert (
        len({s.workload.model_dump_json() + s.load.model_dump_json() for s in arms.values()}) == 1
    )


def test_calibration_needs_the_bundled_engine():
    scenario = load_scenario("scenarios/quickstart.yaml")
    endpoint = scenario.model_copy(
        update={"target": scenario.target.model_copy(update={"kind": "endpoints"})}
    )
    with pytest.raises(InputError, match="target.kind"):
        arm_scenarios(endpoint)


def test_the_screen_it_is_evaluated_with_rejudges_each_recorded_run():
    from harness.analysis.host_state import Screen
    from harness.app.gate.calibration import usable

    waited = GateRun("a", "/x/c1-a", 1.0, "complete", True, None, {"wait_share": 0.8})
    failed = GateRun("a", "/x/c2-a", 1.0, "failed", False, "ended badly: x", {"wait_share": 0.1})
    assert usable(waited, None) and not usable(waited, Screen(max_wait_share=0.75))
    assert usable(waited, Screen(max_wait_share=0.9))
    assert not usable(failed, Screen(max_wait_share=0.9))  # a bad ending is not the host's
    judge = BySlowdown()
    runs = cycles(4)
    runs[1]["s30"].host = {"wait_share": 0.95}
    result = replay_rule(Rule(min_runs=2, max_runs=4), runs, "a", "s30", judge, Screen(0.9))
    assert judge.calls[0] == (["c1-a", "c3-a"], ["c1-s30", "c3-s30"])
    assert result["runs_used"] == [3, 3]


def _key_of(*sets: str, rule: Rule | None = None) -> dict:
    from harness.app.gate.calibrations import calibration_key

    return calibration_key(load_scenario("scenarios/quickstart.yaml", list(sets)), rule or Rule())


def _write(folder: Path, name: str, key: dict) -> Path:
    import json

    path = folder / f"{name}.json"
    path.write_text(json.dumps({"key": key, "rates": {}, "runner": key["runner"]}))
    return path


def test_a_gate_quotes_only_the_calibration_of_its_rule_runner_target_and_scenario(tmp_path):
    from harness.app.gate.calibrations import candidates, quoted

    sim = "target.engine.options.runner=simulated"
    torch_cal = _write(tmp_path, "torch", _key_of())
    sim_cal = _write(tmp_path, "sim", _key_of(sim))
    found, why = quoted(_key_of(sim), candidates(tmp_path, tmp_path))
    assert why is None and found["key"]["runner"] == "simulated"
    assert quoted(_key_of(), [torch_cal, sim_cal])[0]["key"]["runner"] == "torch"
    # The slowdown a calibration injects is not the target's: its arms match the plain gate.
    assert _key_of("target.engine.options.step_time_scale=1.3") == _key_of()
    for other in (
        _key_of(sim, "load.concurrency=3"),  # another scenario's load
        _key_of(sim, "target.engine.options.max_num_seqs=8"),  # another target
        _key_of(sim, rule=Rule(min_runs=4)),  # another rule
    ):
        found, why = quoted(other, [torch_cal, sim_cal])
        assert found is None and why.startswith("no calibration matches this gate")
        assert "--calibrate" in why
    found, why = quoted(_key_of(sim, "load.concurrency=3"), [sim_cal])
    assert "scenario.load.concurrency 6 vs 3 (its value vs this gate's)" in why


def test_an_endpoint_gate_says_a_calibration_needs_the_engine(tmp_path):
    from harness.app.gate.calibrations import quoted

    key = _key_of(
        "target.kind=endpoints", "target.model=m", "target.endpoints=[{url: http://h/v1}]"
    )
    found, why = quoted(key, [])
    assert found is None and key["runner"] == "endpoint" and "target.kind: engine" in why


def test_every_two_arms_run_in_each_order_as_often_in_any_window():
    from itertools import combinations

    from harness.app.gate.calibration import ARMS, cycle_order

    orders = [cycle_order(i) for i in range(19)]
    assert all(sorted(o) == sorted(ARMS) for o in orders)
    for start in range(19):
        for end in range(start + 2, 20):
            for x, y in combinations(ARMS, 2):
                first = sum(o.index(x) < o.index(y) for o in orders[start:end])
                assert abs(2 * first - (end - start)) <= 1, (start, end, x, y)
