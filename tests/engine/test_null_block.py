"""`null_block`, vLLM's pool: page 0 pads block tables and never holds KV, so a pool of N pages
holds N - 1. Without it the same pool holds one page more."""

from __future__ import annotations

from harness.engine.engine import LLMEngine

from .conftest import prompt, sim
from .test_core_hybrid_cache import cached


def test_the_null_block_is_never_handed_out_and_the_pool_holds_one_page_less():
    e = LLMEngine(sim(num_gpu_blocks=8, block_size=16, null_block=True, debug_checks=True))
    assert e.pool.num_blocks == e.pool.num_free == 7
    cached(e, "a", prompt(1, 100))  # 7 blocks: every usable page
    assert 0 not in e.pool.cached.values()
    assert e.pool.num_free == 7


def test_a_prefix_that_fills_the_pool_survives_only_without_the_null_block():
    def hit_after_another(null_block: bool) -> int:
        e = LLMEngine(sim(num_gpu_blocks=9, block_size=16, null_block=null_block))
        first = prompt(1, 64)  # 4 blocks
        cached(e, "a", first, n=1)
        cached(e, "b", prompt(2, 80), n=1)  # 5 more: all 9 pages, or 8 and one evicted
        return cached(e, "c", first + prompt(3, 20), n=1)

    assert hit_after_another(False) == 64
    assert hit_after_another(True) < 64
