"""The roofline cost model against a hand computation, and its wiring into the simulated runner
(`device: h200`, `sim_model`, `tensor_parallel_size`)."""

import pytest

from harness.engine.config import EngineConfig
from harness.engine.runners.cost_model import StepShape
from harness.engine.runners.roofline import RooflineCost
from harness.engine.runners.simulated import SimRunner
from harness.errors import EngineError

# Llama 3.1 8B: 8.03e9 params, 32 layers, hidden 4096, 32 heads, 8 KV heads of 128, vocab
# 128256, bf16. H100: 989 TFLOPS bf16, 3350 GB/s; efficiencies 0.6 and 0.75; 2 ms per step.
MATMUL = 8.03e9 - 128256 * 4096  # the embedding is a lookup, not a matmul
KV_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 heads of 128, 2 bytes: 131072


def test_prefill_is_compute_bound_and_matches_the_hand_computation():
    cost = RooflineCost.of("h100", "llama-3.1-8b")
    n = 4096
    shape = StepShape(tokens=n, attended=n * (n + 1) // 2, samples=1, context=n, chunks=1)
    flops = 2 * MATMUL * n + (2 * 32 * 256 * 32) * n * (n + 1) // 2
    compute = flops / (989e12 * 0.6)
    memory = (8.03e9 * 2 + 32 * n * 8 * 128 * 2 * 2 + n * KV_TOKEN) / (3350e9 * 0.75)
    assert compute > memory
    assert cost.step_seconds(shape) == pytest.approx(0.002 + compute, rel=1e-9)


def test_decode_is_memory_bound_weights_plus_kv_reads():
    cost = RooflineCost.of("h100", "llama-3.1-8b")
    batch, ctx = 32, 8000
    shape = StepShape(batch, batch * ctx, batch, batch * ctx, batch)
    memory = (8.03e9 * 2 + batch * ctx * KV_TOKEN + batch * KV_TOKEN) / (3350e9 * 0.75)
    assert cost.memory_s(shape) > cost.compute_s(shape)
    assert cost.step_seconds(shape) == pytest.approx(0.002 + memory, rel=1e-9)


def test_tensor_parallel_splits_work_and_adds_all_reduces():
    one, eight = (RooflineCost.of("h200", "llama-3.1-70b", tp) for tp in (1, 8))
    shape = StepShape(1, 10_000, 1, 10_000, 1)
    assert eight.memory_s(shape) == pytest.approx(one.memory_s(shape) / 8)
    ring = 2 * 7 / 8 * (1 * 8192 * 2) / 900e9
    assert eight.allreduce_s(shape) == pytest.approx(2 * 80 * (1e-5 + ring))


def test_mixture_of_experts_reads_only_the_experts_it_touches():
    cost = RooflineCost.of("h200", "deepseek-v3", 8)
    one, many = cost.shape.weight_bytes_read(1), cost.shape.weight_bytes_read(4096)
    assert one == pytest.approx(37e9, rel=1e-6)  # fp8: a byte per parameter, 37 B active
    assert many == pytest.approx(671e9, rel=1e-3)  # thousands of tokens touch every expert


def test_the_simulated_runner_uses_it_and_says_it_is_modelled():
    config = EngineConfig(runner="simulated", device="h200", sim_model="llama-3.1-8b")
    runner = SimRunner(config)
    assert isinstance(runner.cost, RooflineCost)
    assert "modelled, not measured" in runner.cost.meta["device"]
    # the pool: 90 % of 141 GB less 16 GB of weights, in 16-token blocks of 131072 B per token
    assert config.total_blocks == int((141e9 * 0.9 - 8.03e9 * 2) // (KV_TOKEN * 16))
    assert runner.page_bytes == KV_TOKEN * 16


def test_roofline_options_are_checked():
    with pytest.raises(EngineError, match="sim_model"):
        EngineConfig(runner="simulated", device="h200")
    with pytest.raises(EngineError, match="device"):
        EngineConfig(runner="torch", device="h200", sim_model="llama-3.1-8b")
    with pytest.raises(EngineError, match="tensor_parallel_size"):
        EngineConfig(runner="simulated", device="l40s", sim_model="llama-3.1-70b")
