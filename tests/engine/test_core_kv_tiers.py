"""The disk tier below the CPU tier: blocks evicted from CPU memory come back from files, a block
whose file does not check out is a miss, and every hit is counted in exactly one tier."""

from __future__ import annotations

import pytest
import torch

from harness.engine.engine import LLMEngine
from harness.engine.tiers.disk import DiskTier
from harness.errors import EngineError

from .conftest import drain, greedy, prompt, sim, tiny

TIERS = ("device", "cpu", "disk", "remote")


def _tiers_of(out) -> dict[str, int]:
    return {t: getattr(out, f"cached_tokens_{t}") for t in TIERS}


def _push_out(e: LLMEngine, n: int = 3) -> None:
    """Other traffic: evicts everything earlier from the device and the 2-block CPU tier."""
    for i in range(n):
        e.add_request(f"x{i}", prompt(50 + i, 150), greedy(2))
        drain(e)


def test_blocks_evicted_from_the_cpu_tier_come_back_from_disk(tmp_path):
    e = LLMEngine(
        sim(
            num_gpu_blocks=12,
            cpu_offload_blocks=2,
            disk_offload_blocks=64,
            disk_offload_dir=str(tmp_path),
        )
    )
    a = prompt(0, 100)  # 6 full blocks
    e.add_request("a", a, greedy(3))
    drain(e)
    _push_out(e)
    out = drain_one(e, "again", a + [7])
    tiers = _tiers_of(out)
    assert tiers["disk"] == 96 and out.cached_tokens == 96
    assert sum(tiers.values()) == out.cached_tokens
    stats = e.stats()
    assert stats.tiers["disk"]["hit_tokens"] == 96 and stats.tiers["disk"]["blocks_out"] == 6
    assert stats.tiers["disk"]["bytes_out"] == 6 * e.config.model.kv_bytes_per_page("float32", 16)
    assert stats.tiers["disk"]["blocks_in"] >= 6 and stats.tiers["cpu"]["blocks_in"] >= 6


def drain_one(e: LLMEngine, rid: str, tokens: list[int]):
    e.add_request(rid, tokens, greedy(2))
    return drain(e)[rid][1]


def test_tier_hits_add_up_per_request_and_in_the_engine_counters(tmp_path):
    e = LLMEngine(
        sim(
            num_gpu_blocks=16,
            cpu_offload_blocks=4,
            disk_offload_blocks=256,
            disk_offload_dir=str(tmp_path),
        )
    )
    outs = []
    for turn in range(4):
        for s in range(3):
            outs.append(drain_one(e, f"s{s}t{turn}", prompt(s, 40 + 30 * turn)))
    for out in outs:
        assert sum(_tiers_of(out).values()) == out.cached_tokens
    stats = e.stats()
    offload = sum(stats.tiers[t]["hit_tokens"] for t in ("cpu", "disk"))
    device = sum(o.cached_tokens_device for o in outs)
    assert device + offload == stats.prefix_cache_hits == sum(o.cached_tokens for o in outs)
    assert stats.tiers["disk"]["hit_tokens"] == sum(o.cached_tokens_disk for o in outs) > 0


def test_a_block_file_that_fails_its_checksum_is_a_miss(tmp_path):
    e = LLMEngine(
        sim(
            num_gpu_blocks=12,
            cpu_offload_blocks=2,
            disk_offload_blocks=64,
            disk_offload_dir=str(tmp_path),
        )
    )
    a = prompt(0, 100)
    e.add_request("a", a, greedy(3))
    drain(e)
    _push_out(e)
    disk = e.tiers.disk
    files = sorted(disk.folder.glob("*.kv"))
    assert files
    for f in files:  # flip one byte of every block file
        raw = bytearray(f.read_bytes())
        raw[-1] ^= 0xFF
        f.write_bytes(bytes(raw))
    out = drain_one(e, "again", a + [7])
    assert out.cached_tokens_disk == 0 and out.cached_tokens == 0
    assert disk.num_corrupt >= 1 and e.stats().tiers["disk"]["corrupt"] == disk.num_corrupt


def test_the_disk_tier_is_an_lru_of_checksummed_files(tmp_path):
    tier = DiskTier(str(tmp_path), 2, block_bytes=8, token_bytes=4)
    tier.put(b"a", b"ta", b"A" * 8)
    tier.put(b"b", b"tb", b"B" * 8)
    assert tier.get(b"a", b"ta") == b"A" * 8  # refreshes a
    tier.put(b"c", b"tc", b"C" * 8)
    assert b"b" not in tier and not tier.path(b"b").exists() and tier.num_evicted == 1
    assert tier.get(b"a", b"xx") is None  # token-verified
    tier.path(b"c").write_bytes(b"HKV1" + b"\0" * 30)
    assert tier.get(b"c", b"tc") is None and tier.num_corrupt == 1 and b"c" not in tier
    folder = tier.folder
    tier.close()
    assert not folder.exists()


def test_a_missing_or_too_small_folder_is_one_line(tmp_path):
    with pytest.raises(EngineError, match="disk_offload_dir.*not a directory"):
        sim(disk_offload_blocks=8, disk_offload_dir=str(tmp_path / "nope"))
    with pytest.raises(EngineError, match="disk_offload_dir.*needed"):
        sim(disk_offload_blocks=8)
    with pytest.raises(EngineError, match=r"disk_offload_blocks.*GiB free"):
        DiskTier(str(tmp_path), 10**12, block_bytes=2**20, token_bytes=64)


@pytest.mark.slow
def test_kv_bytes_survive_device_to_cpu_to_disk_to_device(shared_runner, tmp_path):
    e = LLMEngine(
        tiny(
            num_gpu_blocks=12,
            cpu_offload_blocks=2,
            disk_offload_blocks=64,
            disk_offload_dir=str(tmp_path),
        ),
        runner=shared_runner,
    )
    a = prompt(0, 100)
    e.add_request("a", a, greedy(3))
    first = drain(e)["a"][0]
    _push_out(e)
    r = e.runner
    saved = {
        b: (r.k_cache[:, b].clone(), r.v_cache[:, b].clone()) for b in range(e.pool.num_blocks)
    }
    e.add_request("again", a, greedy(3))
    result = drain(e)["again"]
    assert result[1].cached_tokens_disk == 96
    assert result[0] == first  # the KV read back from disk gives the same greedy tokens
    changed = [b for b in saved if not torch.equal(saved[b][0], r.k_cache[:, b])]
    assert changed  # the restore really wrote device pages


def test_the_simulated_runner_charges_each_tier_move_at_its_cost(tmp_path):
    from harness.engine.runners.cost_model import DEFAULT_TRANSFER, CostModel

    cost = CostModel.load()
    page = 16384
    disk = {**DEFAULT_TRANSFER["disk"], **cost.transfer.get("disk", {})}
    want = 10 * (disk["latency_s"] + page / (disk["read_gb_s"] * 1e9))
    assert cost.transfer_seconds({("disk", "out"): 10}, page) == pytest.approx(want)
    # A model whose steps cost nothing: the modelled time is the moves' time alone.
    free = CostModel(0.0, 0.0, 0.0, 0.0, transfer={"cpu": {"latency_s": 1e-3}})
    free.save(str(tmp_path / "cost.json"))
    e = LLMEngine(
        sim(num_gpu_blocks=12, cpu_offload_blocks=64, cost_model=str(tmp_path / "cost.json"))
    )
    a = prompt(0, 100)
    drain_one(e, "a", a)
    _push_out(e)
    drain_one(e, "again", a + [7])
    moved = e.tiers.blocks_moved
    assert moved["cpu", "out"] == 6 and moved["cpu", "in"] > 6
    assert e.runner.sim_time_s == pytest.approx(free.transfer_seconds(moved, e.runner.page_bytes))
