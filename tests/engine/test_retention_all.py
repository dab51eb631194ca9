"""`prefix_cache_retention: all`, vLLM's behaviour: a sliding-window page given back keeps its
content until evicted, so a fork from the middle of an earlier turn hits while the pool has room
(the other policies keep only chosen windows), and eviction still takes the oldest pages first."""

from __future__ import annotations

from harness.engine.engine import LLMEngine

from .conftest import sim
from .test_core_hybrid_cache import cached, ids, session


def test_a_fork_from_the_middle_of_a_turn_hits_its_window_lazily_kept():
    e = LLMEngine(sim(preset="gemma3-270m", num_gpu_blocks=3000, prefix_cache_retention="all"))
    turn2 = session(e)
    assert cached(e, "fork", turn2[:1600] + ids(3, 50)) == 1600  # 100 blocks, no snapshot needed


def test_lazily_kept_pages_are_evicted_in_lru_order():
    e = LLMEngine(
        sim(
            preset="gemma3-270m",
            num_gpu_blocks=800,
            prefix_cache_retention="all",
            debug_checks=True,
        )
    )
    turn2 = session(e)
    for k in range(4):  # unrelated prompts push the pool past its size
        cached(e, f"other{k}", ids(10 + k, 1500))
    assert cached(e, "fork", turn2[:1600] + ids(3, 50)) == 0


def test_free_order_group_frees_each_group_in_turn_sliding_first():
    e = LLMEngine(
        sim(
            preset="gemma3-270m",
            num_gpu_blocks=3000,
            prefix_cache_retention="all",
            free_order="group",
            debug_checks=True,
        )
    )
    cached(e, "r", ids(1, 1000))
    pool = e.pool
    freed = [p for p in pool.free_queue if pool.blocks[p].hash is not None]
    kinds = [pool.kinds[pool.blocks[p].group] for p in freed]
    assert kinds[-1] == "full" and kinds[0] == "sliding"
    assert kinds == sorted(kinds, key=lambda k: k == "full")  # every sliding page before any full
