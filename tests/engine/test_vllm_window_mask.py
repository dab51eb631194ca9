"""vLLM 0.32's sliding-window rules under `replay+junction` (issue 53): a request hashes only the
window blocks its own mask keeps, and the window blocks it gives back join the LRU group by group,
each group's last block first.

Gemma 3 270M's shape on the simulated runner: blocks of 16 tokens, window 512, so a hit at k
blocks needs the sliding groups' blocks [k - 32, k).
"""

from __future__ import annotations

import numpy as np

from harness.engine.config import SLIDING
from harness.engine.engine import LLMEngine
from harness.engine.sequence import NULL_BLOCK

from .conftest import drain, greedy, sim

BS = 16


def vllm_like() -> LLMEngine:
    options = dict(prefix_cache_retention="replay+junction", free_order="group")
    return LLMEngine(sim(preset="gemma3-270m", num_gpu_blocks=3000, **options))


def ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(300, 60_000, n).tolist()


def test_a_running_request_hashes_no_window_block_past_its_mask():
    e = vllm_like()
    e.add_request("parent", ids(5, 1000), greedy(200))  # its mask: blocks [30, 62)
    parent = e.requests["parent"]
    while len(parent.outputs) < 100:  # it runs on, its window past its prompt: [36, 69)
        e.step()
    fork_at = parent.token_ids[: 68 * BS]
    e.add_request("fork", fork_at + ids(6, 10), greedy(2))
    while "fork" in e.requests:
        outs = {o.request_id: o for o in e.step()}
    # The parent's window over its reply (blocks 62-67) was never hashed: the fork resumes at the
    # last window the parent kept, 62 blocks, though the full groups hold all 68 ...
    assert outs["fork"].cached_tokens == 62 * BS
    drain(e)
    # ... and keeps the window at that junction for the next one.
    e.add_request("fork2", fork_at + ids(7, 10), greedy(2))
    assert drain(e)["fork2"][1].cached_tokens == 68 * BS


def test_reclaimed_window_blocks_join_the_lru_group_by_group_last_first():
    e = vllm_like()
    first = ids(8, 2000)
    e.add_request("first", first, greedy(2))
    drain(e)
    # 62 blocks the full groups hold and the sliding ones do not: its junction keeps [30, 62)
    e.add_request("b", first[:1000] + ids(9, 1000), greedy(4))
    e.step()  # the prefill: its 125 blocks, hashed where its mask says
    tables = [list(t) for t in e.requests["b"].block_tables]
    hashed = {p for t in tables for p in t if p != NULL_BLOCK and e.pool.blocks[p].hash is not None}
    e.step()  # the first decode gives back the blocks [0, 93) no window reads any more
    sliding = [g for g, kind in enumerate(e.pool.kinds) if kind == SLIDING]
    expected = [
        tables[g][i] for g in sliding for i in reversed(range(93)) if tables[g][i] in hashed
    ]
    assert len(expected) == 5 * 33  # [30, 62) and 92, in each of the five sliding groups
    assert list(e.pool.free_queue)[-len(expected) :] == expected
