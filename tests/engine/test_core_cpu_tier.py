"""Blocks evicted from the device survive in the CPU tier unchanged and come back on a hit."""

from __future__ import annotations

import pytest
import torch

from harness.engine.engine import LLMEngine
from harness.engine.tiers.cpu import CpuTier

from .conftest import drain, greedy, prompt, tiny


def kv_of(engine: LLMEngine, block_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    r = engine.runner
    return r.k_cache[:, block_id].clone(), r.v_cache[:, block_id].clone()


@pytest.mark.slow
def test_kv_bytes_survive_device_to_cpu_to_device(shared_runner):
    e = LLMEngine(tiny(num_gpu_blocks=12, cpu_offload_blocks=32), runner=shared_runner)
    a = prompt(0, 100)  # 6 full blocks
    e.add_request("a", a, greedy(3))
    drain(e)
    hashes = e.pool.find_prefix(e.add_request("probe", a, greedy(1))).entries
    e.abort_request("probe")
    original = {e.pool.blocks[b].hash: kv_of(e, b) for b in hashes}
    assert len(original) == 6
    # Other traffic evicts every block of `a` from the device into the CPU tier.
    for i in range(3):
        e.add_request(f"x{i}", prompt(10 + i, 150), greedy(2))
        drain(e)
    assert not set(original) & {e.pool.blocks[b].hash for b in e.pool.pages.first.values()}
    assert set(original) <= set(e.pool.cpu_tier.hashes())
    for h, (k, v) in original.items():
        saved_k, saved_v = e.pool.cpu_tier.get(h, e.pool.cpu_tier._blocks[h].tokens).payload
        assert torch.equal(saved_k, k) and torch.equal(saved_v, v)
    # A repeat of `a` hits the CPU tier; the restored device blocks hold the same bytes.
    e.add_request("again", a + [7], greedy(3))
    restored = {}

    def grab(when, eng):
        if when == "after" and "again" in eng.requests:
            for b in eng.requests["again"].block_table[:6]:
                restored[eng.pool.blocks[b].hash] = kv_of(eng, b)

    out = drain(e, grab)["again"][1]
    assert out.cached_tokens_cpu == 96 and out.cached_tokens_device == 0 and out.cached_tokens == 96
    assert e.stats().cpu_cache_hits == 96
    assert restored.keys() == original.keys()
    for h, (k, v) in original.items():
        assert torch.equal(restored[h][0], k) and torch.equal(restored[h][1], v)


def test_cpu_and_device_hits_are_counted_separately():
    from .conftest import sim

    e = LLMEngine(sim(num_gpu_blocks=10, cpu_offload_blocks=64, max_num_seqs=1))
    a = prompt(0, 64)
    e.add_request("a", a + prompt(1, 64), greedy(2))  # 8 blocks: a's 4 then a private tail
    drain(e)
    # b shares a's 4 blocks and needs 5 more: the spare block, a's partial last block, then a's
    # tail blocks 8, 7, 6 (tail first) are evicted to the CPU tier; a's block 5 stays.
    e.add_request("b", a + prompt(2, 64), greedy(2))
    drain(e)
    e.add_request("c", a + prompt(1, 64) + [5], greedy(2))
    out = drain(e)["c"][1]
    assert out.cached_tokens_device == 80  # the shared prefix + a's 5th block, still on device
    assert out.cached_tokens_cpu == 48  # a's evicted tail, copied back from the CPU tier
    assert out.cached_tokens == 128


def test_cpu_tier_is_an_lru_of_its_capacity():
    tier = CpuTier(2)
    tier.put(b"a", (1,), None)
    tier.put(b"b", (2,), None)
    assert tier.get(b"a", (1,)) is not None  # refreshes a
    tier.put(b"c", (3,), None)
    assert tier.hashes() == [b"a", b"c"] and tier.num_evicted == 1
    assert tier.get(b"a", (9,)) is None  # token-verified
