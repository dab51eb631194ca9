"""The block pool on its own: hashing, hits, LRU and tail-first eviction, invariants."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.engine.block_pool import ROOT_HASH, BlockPool, block_hash, hash_blocks
from harness.engine.sequence import Request, SamplingParams
from harness.errors import EngineError

from .conftest import prompt

BS = 4


def make(tokens: list[int], rid: str = "r") -> Request:
    return Request(rid, tokens, SamplingParams(max_tokens=1), 0.0)


def compute(pool: BlockPool, req: Request) -> int:
    """Admit the request as the scheduler would and mark its whole prompt computed."""
    hit = pool.find_prefix(req)
    n_hit = len(hit.entries) * BS
    assert pool.can_take(hit, -(-req.num_tokens // BS) - len(hit.entries))
    pool.take(req, hit)
    req.num_computed_tokens = n_hit
    assert pool.allocate_slots(req, req.num_tokens - n_hit)
    req.num_computed_tokens = req.num_tokens
    pool.cache_blocks(req)
    return n_hit


@pytest.mark.slow
def test_hash_is_stable_across_processes():
    code = (
        "from harness.engine.block_pool import hash_blocks; from harness.engine.sequence import *;"
        "print(hash_blocks(Request('r', [1, 2, 3, 4], SamplingParams(1), 0.0), 4, 1)[0].hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert other.stdout.strip() == hash_blocks(make([1, 2, 3, 4]), BS, 1)[0].hex()
    assert block_hash(ROOT_HASH, b"1234") != block_hash(ROOT_HASH, b"1235")


def test_hash_chains_over_parents():
    a = hash_blocks(make([1, 2, 3, 4, 5, 6, 7, 8]), BS, 2)
    b = hash_blocks(make([9, 9, 9, 9, 5, 6, 7, 8]), BS, 2)
    assert len(a) == 2 and a[0] != b[0] and a[1] != b[1]  # same last block, different parent


def test_hit_is_block_aligned_and_leaves_one_token():
    pool = BlockPool(16, BS)
    tokens = prompt(0, 12)
    compute(pool, make(tokens, "a"))
    # The same 12 tokens: 3 full blocks cached, but one token must be computed -> 2 blocks.
    assert len(pool.find_prefix(make(tokens, "b")).entries) == 2
    assert len(pool.find_prefix(make(tokens + [5], "c")).entries) == 3
    assert len(pool.find_prefix(make(tokens[:6] + [7, 7, 7], "d")).entries) == 1


def test_hits_are_token_verified():
    pool = BlockPool(16, BS)
    a = make(prompt(1, 9), "a")
    compute(pool, a)
    # The resident map is keyed by (parent hash, tokens): one changed token in the second block
    # misses even though the first block, and so the parent hash, match.
    other = prompt(1, 9)
    other[5] += 1
    assert len(pool.find_prefix(make(other, "b")).entries) == 1
    # A block whose tokens no longer match its map entry is caught by the invariant check.
    pool.blocks[a.block_table[0]].tokens = bytes(16)
    with pytest.raises(EngineError, match="content"):
        pool.check_invariants([a.block_table])


def test_free_keeps_hashes_and_evicts_tail_first_in_lru_order():
    pool = BlockPool(8, BS)
    a, b = make(prompt(2, 12), "a"), make(prompt(3, 12), "b")  # 3 blocks each
    compute(pool, a)
    compute(pool, b)
    a_blocks, b_blocks = list(a.block_table), list(b.block_table)
    pool.free(a)
    pool.free(b)
    # Free queue: 2 never-used blocks, then a's blocks tail first, then b's tail first.
    order = list(pool.free_queue)
    assert order[2:] == a_blocks[::-1] + b_blocks[::-1]
    pool.check_invariants([])
    # Lazy eviction: a is still fully hittable after free.
    assert len(pool.find_prefix(make(prompt(2, 12) + [1], "a2")).entries) == 3
    # Allocating 3 blocks takes the 2 empty ones, then a's TAIL (its prefix survives).
    c = make(prompt(4, 12), "c")
    assert pool.allocate_slots(c, 12)
    assert c.block_table == order[:3]
    assert len(pool.find_prefix(make(prompt(2, 12) + [1], "a3")).entries) == 2


def test_shared_prefix_outlives_private_tails_of_forks():
    pool = BlockPool(10, BS)
    base = prompt(5, 8)  # 2 shared blocks
    forks = [make(base + prompt(10 + i, 8), f"f{i}") for i in range(3)]
    for f in forks:
        compute(pool, f)
    for f in forks:
        pool.free(f)
    pool.check_invariants([])
    # Pressure: take 8 of the 10 blocks; the 2 shared prefix blocks must be what is left.
    filler = make(prompt(99, 32), "x")
    assert pool.allocate_slots(filler, 32)
    assert len(pool.find_prefix(make(base + [1], "probe")).entries) == 2
    for f in forks:
        tail_probe = make(f.token_ids + [1], "probe")
        assert len(pool.find_prefix(tail_probe).entries) == 2  # tails are gone


def test_touch_of_free_hit_block_takes_it_out_of_the_free_queue():
    pool = BlockPool(6, BS)
    a = make(prompt(6, 9), "a")
    compute(pool, a)
    pool.free(a)
    b = make(prompt(6, 9), "b")
    assert compute(pool, b) == 8
    pool.check_invariants([b.block_table])
    assert pool.blocks[b.block_table[0]].ref_cnt == 1 and b.block_table[0] not in pool.free_queue


def test_shared_blocks_count_every_holder():
    pool = BlockPool(8, BS)
    a, b = make(prompt(7, 9), "a"), make(prompt(7, 9), "b")
    compute(pool, a)
    compute(pool, b)
    assert a.block_table[:2] == b.block_table[:2]
    pool.check_invariants([a.block_table, b.block_table])
    with pytest.raises(EngineError, match="ref_cnt"):
        pool.check_invariants([a.block_table])
    pool.free(a)
    pool.free(b)
    pool.check_invariants([])
    assert pool.num_free == 8


def test_invariant_check_catches_a_block_missing_from_the_free_queue():
    pool = BlockPool(4, BS)
    del pool.free_queue[2]
    with pytest.raises(EngineError, match="block 2"):
        pool.check_invariants([])


def test_caching_off_never_hits_or_hashes():
    pool = BlockPool(8, BS, enable_caching=False)
    a = make(prompt(8, 9), "a")
    compute(pool, a)
    assert not pool.pages and pool.find_prefix(make(prompt(8, 9), "b")).entries == []
