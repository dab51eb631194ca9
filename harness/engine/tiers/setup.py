"""The engine's KV tiers from its configuration, and their counters as `EngineStats` reports them."""

from __future__ import annotations

from collections import Counter

from harness.engine.config import EngineConfig
from harness.engine.sequence import TOKEN_BYTES
from harness.engine.tiers.cpu import CpuTier
from harness.engine.tiers.disk import DiskTier
from harness.engine.tiers.remote import RemoteTier
from harness.engine.tiers.stack import OFFLOAD_TIERS, BlockMover, KVTiers
from harness.errors import EngineError


def make_tiers(config: EngineConfig, runner: BlockMover) -> KVTiers | None:
    """The tiers the configuration asks for (None: the device pool alone)."""
    c = config
    if not (c.cpu_offload_blocks or c.disk_offload_blocks or c.kv_store):
        return None
    page = c.model.kv_bytes_per_page(c.dtype, c.block_size)
    data_bytes = len(runner.encode_block(runner.save_block(0)))  # what one block file holds
    disk = None
    if c.disk_offload_blocks and c.disk_offload_dir is not None:
        token_bytes = c.block_size * TOKEN_BYTES
        disk = DiskTier(c.disk_offload_dir, c.disk_offload_blocks, data_bytes, token_bytes)
    return KVTiers(
        runner,
        page,
        cpu=CpuTier(c.cpu_offload_blocks) if c.cpu_offload_blocks else None,
        disk=disk,
        remote=_remote(c),
    )


def _remote(c: EngineConfig) -> RemoteTier | None:
    if c.kv_store is None:
        return None
    if c.kv_store == "local":
        raise EngineError(
            "field 'kv_store': 'local' means a run starts the store; `harness serve` needs its URL"
        )
    return RemoteTier(c.kv_store, keep=c.total_blocks)


def tier_stats(tiers: KVTiers | None, hits: Counter[str]) -> dict[str, dict[str, int]]:
    """Per tier below the device: hit tokens, blocks and bytes moved, resident blocks, faults."""
    if tiers is None:
        return {}
    present = {"cpu": tiers.cpu, "disk": tiers.disk, "remote": tiers.remote}
    resident = tiers.resident()
    out = {}
    for tier in OFFLOAD_TIERS:
        if present[tier] is None:
            continue
        out[tier] = {
            "hit_tokens": hits[tier],
            "blocks_in": tiers.blocks_moved[tier, "in"],
            "blocks_out": tiers.blocks_moved[tier, "out"],
            "bytes_in": tiers.bytes_moved(tier, "in"),
            "bytes_out": tiers.bytes_moved(tier, "out"),
            "resident_blocks": resident.get(tier, 0),
            "corrupt": tiers.disk.num_corrupt if tier == "disk" and tiers.disk else 0,
            "errors": _errors(tiers, tier),
        }
    return out


def _errors(tiers: KVTiers, tier: str) -> int:
    if tier == "disk" and tiers.disk is not None:
        return tiers.disk.num_write_errors
    if tier == "remote" and tiers.remote is not None:
        return tiers.remote.num_errors
    return 0
