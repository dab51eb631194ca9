"""Shared helpers for the engine tests: small configs, prompts, run-to-completion drivers."""

from __future__ import annotations

import numpy as np
import pytest

from harness.engine.config import EngineConfig
from harness.engine.engine import LLMEngine
from harness.engine.sequence import SamplingParams


def tiny(**overrides) -> EngineConfig:
    """The tiny preset on CPU float32 with a small KV cache and invariant checks on."""
    base = dict(num_gpu_blocks=256, device="cpu", debug_checks=True)
    base.update(overrides)
    return EngineConfig(**base)


def sim(**overrides) -> EngineConfig:
    """The simulated runner with no sleeping: the real scheduler and block pool, instantly."""
    return tiny(**{"runner": "simulated", "sim_time_scale": 0.0, **overrides})


def prompt(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(1000, 32000, n).tolist()


def greedy(max_tokens: int = 8) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True)


def drain(engine: LLMEngine, on_step=None) -> dict[str, list]:
    """Step until idle; returns request id -> [output token ids, final RequestOutput]."""
    result: dict[str, list] = {}
    while engine.has_unfinished():
        if on_step is not None:
            on_step("before", engine)
        for out in engine.step():
            entry = result.setdefault(out.request_id, [[], None])
            entry[0].extend(out.new_token_ids)
            if out.finished:
                entry[1] = out
        if on_step is not None:
            on_step("after", engine)
    assert_idle(engine)
    return result


def assert_idle(engine: LLMEngine) -> None:
    """When nothing is in flight every count is back to zero and the pool is consistent."""
    engine.scheduler.check_invariants()
    pool = engine.pool
    assert pool.num_free == pool.num_blocks
    assert all(b.ref_cnt == 0 for b in pool.blocks)
    assert not engine.scheduler.running and not engine.scheduler.waiting and not engine.requests


@pytest.fixture(scope="session")
def shared_runner():
    """One torch runner (model + KV tensors) reused by tests that need a 256-block tiny engine."""
    from harness.engine.runners.torch_runner import TorchRunner

    return TorchRunner(tiny())
