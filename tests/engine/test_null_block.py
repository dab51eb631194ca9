"""`null_block`, vLLM's pool: page 0 pads block tables and never holds KV, so a pool of N pages
holds N - 1. Without it the same pool holds one page more."""

from __future__ import annotations

import pytest

from harness.engine.engine import EngineRequestError, LLMEngine
from harness.engine.sequence import SamplingParams

from .conftest import prompt, sim
from .test_core_hybrid_cache import cached


def test_the_null_block_is_never_handed_out_and_the_pool_holds_one_page_less():
    e = LLMEngine(sim(num_gpu_blocks=8, block_size=16, null_block=True, debug_checks=True))
    assert e.pool.num_blocks == e.pool.num_free == 7
    cached(e, "a", prompt(1, 100))  # 7 blocks: every usable page
    assert 0 not in e.pool.pages.first.values()
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


def test_the_largest_request_is_admitted_at_vllms_smallest_pool_and_not_one_page_below():
    """vLLM admits by its sliding groups' bound, cdiv(W - 1 + chunk, block) + 1 pages each (at
    Gemma 3's window 512, chunks of 2,048 and blocks of 128: 21), so a 3,072-token request fits
    a pool of 130 pages with the null block (24 + 5 x 21 = 129 usable) and not one of 129."""

    def engine(pages: int) -> LLMEngine:
        return LLMEngine(
            sim(
                preset="gemma3-270m",
                num_gpu_blocks=pages,
                block_size=128,
                max_num_batched_tokens=2048,
                max_model_len=3072,
                null_block=True,
                debug_checks=False,
            )
        )

    params = SamplingParams(max_tokens=114, ignore_eos=True)
    engine(130).validate("a", prompt(1, 2958), params)  # 3,072 tokens
    with pytest.raises(EngineRequestError, match="do not fit in the KV cache"):
        engine(129).validate("a", prompt(1, 2958), params)
