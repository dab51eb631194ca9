"""`admit_whole_prompt`, vLLM's `scheduler_reserve_full_isl`: a waiting request is admitted only
when its whole prompt fits the free pages, not only its first chunk; and the bound it admits a
sliding-window group by."""

from __future__ import annotations

import numpy as np
import pytest

from harness.engine.engine import LLMEngine

from .conftest import drain, greedy, prompt, sim


def admitted_beside_a_long_decode(admit_whole_prompt: bool) -> bool:
    """`a` (200 tokens, decoding) holds 13 of 20 blocks of 16; `b` (160 tokens) needs 10 in all
    but its first 64-token chunk only 4: is `b` running beside `a`?"""
    e = LLMEngine(
        sim(
            num_gpu_blocks=20,
            block_size=16,
            max_num_batched_tokens=64,
            admit_whole_prompt=admit_whole_prompt,
        )
    )
    e.add_request("a", prompt(1, 200), greedy(40))
    while e.requests["a"].num_computed_tokens < 200:
        e.step()
    e.add_request("b", prompt(2, 160), greedy(4))
    e.step()
    running = {r.request_id for r in e.scheduler.running}
    assert "a" in running
    drain(e)  # both finish either way
    return "b" in running


def test_the_first_chunk_admits_by_default_the_whole_prompt_with_the_option():
    assert admitted_beside_a_long_decode(False)
    assert not admitted_beside_a_long_decode(True)


@pytest.mark.parametrize(("batched", "pages"), [(2048, 21), (512, 9), (8192, 25)])
def test_a_sliding_group_holds_at_most_vllms_bound(batched, pages):
    """cdiv(min(W - 1 + chunk, max_model_len), block) + 1 (vLLM's `SlidingWindowSpec`)."""
    c = sim(
        preset="gemma3-270m",
        block_size=128,
        max_num_batched_tokens=batched,
        max_model_len=3072,
        num_gpu_blocks=400,
    )
    assert c.sliding_pages == pages


def test_a_chunk_with_no_room_past_a_long_hit_waits_and_every_request_ends():
    # vLLM's rules on Gemma 3 with a 512-token step budget: a request admitted by its whole
    # prompt's bound (13 blocks hit, 3 to go) whose chunk needs every sliding group's next blocks
    # too, more pages than are free. It used to raise IndexError; it waits for room instead. And
    # a window reclaim gives pages back as a free() does, so a blocked head is looked at again
    # (debug_checks: "skipped as blocked but fits").
    from harness.whatif.server import LIKE

    for seed in (0, 1):  # 0 raised IndexError; 1, with that fixed, "blocked but fits"
        _vllm_like_traffic(np.random.default_rng(seed), LIKE["vllm"])


def _vllm_like_traffic(rng: np.random.Generator, like: dict) -> None:
    c = sim(
        preset="gemma3-270m",
        block_size=128,
        max_num_batched_tokens=512,
        max_model_len=2048,
        num_gpu_blocks=102,
        **like,
    )
    assert c.debug_checks
    e = LLMEngine(c)
    shared = rng.integers(1000, 32000, 1900).tolist()
    added, finished = 0, set()
    for t in range(2000):
        if t < 400 and rng.random() < 0.15:
            n = int(rng.integers(1200, 1950))
            ids = shared[:n] if rng.random() < 0.7 else rng.integers(1000, 32000, n).tolist()
            e.add_request(f"r{added}", ids, greedy(int(rng.integers(2, 40))))
            added += 1
        if e.has_unfinished():
            finished |= {o.request_id for o in e.step() if o.finished}
    assert added > 40 and not e.has_unfinished()
    assert finished == {f"r{k}" for k in range(added)}
