"""`keep_duplicates`, vLLM's hash map: two requests that compute one prefix in the same step both
keep it hashed (vLLM does not de-duplicate), so the second copy is freed to the LRU's tail, ahead
of older cached prefixes; without it the second copy is unhashed and is reused first."""

from __future__ import annotations

import pytest

from harness.engine.engine import LLMEngine

from .conftest import drain, greedy, prompt, sim


def older_prefix_after_twins(keep_duplicates: bool) -> tuple[int, int]:
    """`x` caches a 64-token prefix (4 of 40 pages); `a` and `b` then send another 64-token
    prompt in one step (neither hits the other: 8 pages); then `c` takes 32 pages; then `x`'s
    prompt again. Returns (hashed pages after the twins, tokens `x`'s prompt then hits)."""
    e = LLMEngine(
        sim(
            num_gpu_blocks=40,
            block_size=16,
            max_num_batched_tokens=512,
            keep_duplicates=keep_duplicates,
            debug_checks=True,
        )
    )
    older = prompt(1, 64)
    one(e, "x", older)
    twin = prompt(2, 64)
    e.add_request("a", twin, greedy(1))
    e.add_request("b", twin, greedy(1))
    out = drain(e)
    assert out["a"][1].cached_tokens == out["b"][1].cached_tokens == 0
    hashed = sum(b.hash is not None for b in e.pool.blocks)
    one(e, "c", prompt(3, 512))
    return hashed, one(e, "x again", older + prompt(4, 20))


def one(e: LLMEngine, rid: str, ids: list[int]) -> int:
    e.add_request(rid, ids, greedy(1))
    return drain(e)[rid][1].cached_tokens


@pytest.mark.parametrize(("keep", "hashed", "hit"), [(False, 8, 64), (True, 12, 0)])
def test_the_second_copy_is_hashed_and_pushes_older_prefixes_out(keep, hashed, hit):
    assert older_prefix_after_twins(keep) == (hashed, hit)
