"""The simulated runner and its cost model: deterministic outputs, modelled time, calibration."""

from __future__ import annotations

import json
import time

import pytest

from harness.engine.config import EngineConfig
from harness.engine.engine import LLMEngine
from harness.engine.runners.cost_model import CostModel, StepShape, calibrate
from harness.errors import EngineError

from .conftest import drain, greedy, prompt, sim


def run(cfg: EngineConfig) -> tuple[dict, LLMEngine]:
    e = LLMEngine(cfg)
    for i in range(4):
        e.add_request(f"r{i}", prompt(0, 40) + prompt(i + 1, 30), greedy(12))
    return {rid: toks for rid, (toks, _) in drain(e).items()}, e


def test_outputs_are_deterministic_and_independent_of_caching():
    a, _ = run(sim())
    b, _ = run(sim(enable_prefix_caching=False, max_num_batched_tokens=16))
    assert a == b and all(len(t) == 12 and min(t) >= 1000 for t in a.values())


def test_modelled_time_is_the_sum_of_step_costs(tmp_path):
    path = tmp_path / "cm.json"
    CostModel(0.01, 1e-4, 1e-8, 2e-3).save(str(path))
    e = LLMEngine(sim(cost_model=str(path)))
    e.add_request("a", prompt(0, 100), greedy(3))
    total = 0.0
    while e.has_unfinished():
        e.step()
        total += CostModel.load(str(path)).step_seconds(StepShape.of(e.last_schedule))
    assert e.runner.sim_time_s == pytest.approx(total)
    # Prefill of 100 tokens then 2 decodes over 100 and 101 cached tokens.
    assert total == pytest.approx(3 * 0.01 + 102 * 1e-4 + (5050 + 101 + 102) * 1e-8 + 3 * 2e-3)


def test_each_step_is_priced_exactly_and_by_the_runner_s_current_cost_model():
    # a step's shape is priced once (SimRunner._step_seconds): the same bits as pricing each step
    e = LLMEngine(sim(enable_prefix_caching=False))  # the second request's steps repeat the first's
    total = 0.0
    for rid, cost in (("a", e.runner.cost), ("b", CostModel(0.5, 1e-3, 1e-6, 0.1))):
        e.runner.cost = cost  # replaced between requests (whatif.replay sets its own after init)
        e.add_request(rid, prompt(0, 40), greedy(4))
        while e.has_unfinished():
            e.step()
            total += cost.step_seconds(StepShape.of(e.last_schedule))
            assert e.runner.sim_time_s == total  # exactly: the same sum of the same floats


@pytest.mark.slow
def test_wall_time_follows_the_time_scale(tmp_path):
    path = tmp_path / "cm.json"
    CostModel(0.05, 0.0, 0.0, 0.0).save(str(path))
    e = LLMEngine(sim(cost_model=str(path), sim_time_scale=1.0))
    e.add_request("a", prompt(0, 10), greedy(4))
    t0 = time.perf_counter()
    drain(e)
    assert time.perf_counter() - t0 >= 4 * 0.05


def test_a_bad_cost_model_file_is_a_clear_error(tmp_path):
    path = tmp_path / "cm.json"
    path.write_text('{"fixed_s": 1}')
    with pytest.raises(EngineError, match="cost model"):
        LLMEngine(sim(cost_model=str(path)))


def test_the_shipped_default_cost_model_loads():
    cm = CostModel.load()
    assert cm.meta.get("preset") == "tiny" and cm.per_token_s > 0


@pytest.mark.slow
def test_calibrate_writes_a_loadable_fit(tmp_path):
    out = tmp_path / "cal.json"
    d = calibrate(EngineConfig(device="cpu"), str(out), max_context=1100, reps=1)
    assert json.loads(out.read_text()) == d
    cm = CostModel.load(str(out))
    assert min(cm.fixed_s, cm.per_token_s, cm.per_attended_s, cm.per_sample_s) >= 0
    assert cm.step_seconds(StepShape(512, 512 * 256, 1)) > 0 and d["meta"]["steps_timed"] >= 8
    for tier in ("cpu", "disk"):  # the tiers' copies, measured on this machine
        cost = cm.transfer[tier]
        assert cost["write_gb_s"] > 0 and cost["read_gb_s"] > 0 and cost["latency_s"] >= 0
