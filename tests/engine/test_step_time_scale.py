"""`step_time_scale`: every runner's steps take that many times as long (an injected slowdown)."""

from __future__ import annotations

import time

import pytest

from harness.engine.engine import LLMEngine
from harness.engine.runners.cost_model import CostModel
from harness.engine.runners.torch_runner import TorchRunner

from .conftest import drain, greedy, prompt, sim, tiny


def _modelled(scale: float, path) -> tuple[float, list[float]]:
    e = LLMEngine(sim(cost_model=str(path), step_time_scale=scale))
    e.add_request("a", prompt(0, 100), greedy(4))
    steps = []
    while e.has_unfinished():
        e.step()
        steps.append(e.runner.last_step_s)
    return e.runner.sim_time_s, steps


def test_the_simulated_runner_models_every_step_longer(tmp_path):
    path = tmp_path / "cm.json"
    CostModel(0.01, 1e-4, 1e-8, 2e-3).save(str(path))
    base_total, base_steps = _modelled(1.0, path)
    slow_total, slow_steps = _modelled(1.3, path)
    assert len(slow_steps) == len(base_steps) == 4  # the same schedule, only slower
    assert slow_steps == pytest.approx([1.3 * s for s in base_steps])
    assert slow_total == pytest.approx(1.3 * base_total)


@pytest.mark.slow
def test_the_simulated_runner_sleeps_the_scaled_step(tmp_path):
    path = tmp_path / "cm.json"
    CostModel(0.02, 0.0, 0.0, 0.0).save(str(path))
    e = LLMEngine(sim(cost_model=str(path), sim_time_scale=1.0, step_time_scale=2.0))
    e.add_request("a", prompt(0, 10), greedy(3))
    t0 = time.perf_counter()
    drain(e)
    # time.sleep never returns early: 3 steps of 0.02 s modelled, doubled, are at least 0.12 s
    assert time.perf_counter() - t0 >= 3 * 0.04
    assert e.runner.sim_time_s == pytest.approx(3 * 0.04)


@pytest.mark.parametrize("scale", [1.0, 1.3])
@pytest.mark.slow
def test_the_torch_runner_sleeps_the_extra_share_of_each_step(scale):
    e = LLMEngine(tiny(step_time_scale=scale))
    assert isinstance(e.runner, TorchRunner)
    e.add_request("a", prompt(0, 40), greedy(3))
    while e.has_unfinished():
        t0 = time.perf_counter()
        e.step()
        wall = time.perf_counter() - t0
        r = e.runner
        assert r.last_compute_s > 0
        assert r.last_extra_s == pytest.approx((scale - 1.0) * r.last_compute_s)
        assert r.last_step_s == pytest.approx(r.last_compute_s + r.last_extra_s)
        assert wall >= r.last_step_s  # the extra was slept inside the step, not skipped


@pytest.mark.slow
def test_the_scale_does_not_change_what_is_computed():
    a = LLMEngine(tiny())
    b = LLMEngine(tiny(step_time_scale=1.5))
    for e in (a, b):
        e.add_request("r", prompt(1, 30), greedy(5))
    assert drain(a)["r"][0] == drain(b)["r"][0]
