"""The block pool's invariants, checked after every engine step when `EngineConfig.debug_checks`
is on (the tests): every page's reference count equals its holders in the live block tables, a
page is free exactly when nothing holds it, the hash map and its duplicates point only at pages
of that content, and the pages in use are counted per kind as they are held."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from harness.engine.prefix_lookup import block_hash
from harness.engine.sequence import NULL_BLOCK
from harness.errors import EngineError

if TYPE_CHECKING:
    from harness.engine.block_pool import BlockPool


def check_pool(pool: BlockPool, block_tables: list[list[int]]) -> None:
    """Raise EngineError if `pool` disagrees with the live requests' block tables."""
    refs = Counter(b for table in block_tables for b in table if b != NULL_BLOCK)
    for block in pool.blocks[pool.null_page :]:
        if block.ref_cnt != refs.get(block.block_id, 0):
            raise EngineError(
                f"block {block.block_id}: ref_cnt {block.ref_cnt} != {refs.get(block.block_id, 0)} holders"
            )
        if (block.ref_cnt == 0) != (block.block_id in pool.free_queue):
            raise EngineError(
                f"block {block.block_id}: ref_cnt {block.ref_cnt} but in free queue: {block.block_id in pool.free_queue}"
            )
        if block.hash is not None and block.block_id not in pool.pages.pages_of(block):
            raise EngineError(f"block {block.block_id}: its content is not mapped to it")
        if (block.hash is None) != (block.tokens is None):
            raise EngineError(f"block {block.block_id}: hash and token ids disagree")
    if any(key not in pool.pages.first for key in pool.pages.duplicates):
        raise EngineError("a duplicate page's content has no first page in the hash map")
    for (g, parent, tokens), page in pool.pages.entries():
        block = pool.blocks[page]
        if (block.group, block.parent, block.tokens) != (
            g,
            parent,
            tokens,
        ) or block.hash != block_hash(parent, tokens):
            raise EngineError(f"hash map entry points at block {page} with other content")
    held = Counter(pool.kinds[b.group] for b in pool.blocks if b.ref_cnt > 0)
    if held != +pool.in_use:
        raise EngineError(f"pages in use by kind {dict(held)} != counted {dict(pool.in_use)}")
    if pool.cpu_tier is not None and len(pool.cpu_tier) > pool.cpu_tier.capacity:
        raise EngineError("CPU tier holds more blocks than its capacity")
