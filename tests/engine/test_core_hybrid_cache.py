"""One pool, two lifetimes: sliding-window reclaim, window-aware prefix hits, snapshot retention.

The simulated runner with the Gemma 3 270M shape: 1 full-attention and 5 sliding-window KV groups
(3 layers each), blocks of 16 tokens, window 512. A hit at k blocks needs the full groups' blocks
[0, k) and the sliding groups' blocks [k - 32, k) (window_start(16k) = (16k - 511) // 16 = k - 32).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.engine.engine import LLMEngine

from .conftest import drain, greedy, sim

BS, GROUPS = 16, 6


def gemma(**overrides) -> LLMEngine:
    return LLMEngine(sim(preset="gemma3-270m", num_gpu_blocks=3000, **overrides))


def ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(300, 60_000, n).tolist()


def cached(engine: LLMEngine, rid: str, prompt: list[int], n: int = 4) -> int:
    engine.add_request(rid, prompt, greedy(n))
    return drain(engine)[rid][1].cached_tokens


def session(engine: LLMEngine) -> list[int]:
    """Turn 1: a 1000-token prompt; turn 2 adds its reply and 1000 tokens. Both finish."""
    turn1 = ids(1, 1000)
    engine.add_request("t1", turn1, greedy(4))
    reply = drain(engine)["t1"][0]
    turn2 = turn1 + reply + ids(2, 1000)
    assert cached(engine, "t2", turn2) == 1000 // BS * BS  # the end of turn 1 (a snapshot)
    return turn2


@pytest.mark.parametrize(
    ("policy", "first", "second"),
    [
        # Turn ends retained: the end of turn 1 (62 blocks = 992 tokens) is the last one before 1600.
        ("interval", 992, 992),
        # The first fork sees its prefix a second time and keeps the window at 1600; the next one hits it.
        ("interval+selective", 992, 1600),
        # Nothing outlives its request: the windows of both turns are gone.
        ("none", 0, 0),
    ],
)
@pytest.mark.slow
def test_fork_from_the_middle_of_a_turn(policy, first, second):
    e = gemma(prefix_cache_retention=policy, debug_checks=True)
    turn2 = session(e) if policy != "none" else _session_none(e)
    fork_at = turn2[:1600]  # inside turn 2's new tokens
    assert cached(e, "fork1", fork_at + ids(3, 50)) == first
    assert cached(e, "fork2", fork_at + ids(4, 50)) == second


def _session_none(e: LLMEngine) -> list[int]:
    turn1 = ids(1, 1000)
    e.add_request("t1", turn1, greedy(4))
    reply = drain(e)["t1"][0]
    turn2 = turn1 + reply + ids(2, 1000)
    assert cached(e, "t2", turn2) == 0  # turn 1's window went with it
    return turn2


def test_none_hits_what_a_running_request_still_holds():
    e = gemma(prefix_cache_retention="none", debug_checks=True)
    parent = ids(5, 2004)
    e.add_request("parent", parent, greedy(50))
    for _ in range(3):  # prefill (one 2004-token chunk) and two decodes: the parent is running
        e.step()
    e.add_request("fork", parent + ids(6, 10), greedy(2))
    while "fork" in e.requests:
        outs = {o.request_id: o for o in e.step()}
    # Its window at 2000 tokens (blocks 93..124) is still in the running parent's tables.
    assert outs["fork"].cached_tokens == 2004 // BS * BS
    drain(e)
    assert cached(e, "late", parent + ids(7, 10)) == 0  # the parent finished: its window is gone


def test_sliding_blocks_are_given_back_as_the_window_moves():
    e = gemma(max_num_batched_tokens=256, debug_checks=True)
    e.add_request("long", ids(8, 4000), greedy(2))
    peak_sliding = 0
    while e.has_unfinished():
        e.step()
        peak_sliding = max(peak_sliding, e.pool.in_use["sliding"])
    # A chunk starts at a multiple of 256 tokens, s = 16m: each sliding group holds the window's
    # 32 blocks before it and the chunk's 16 blocks, 48 x 5 groups. The full group holds them all.
    assert peak_sliding == 48 * 5
    assert e.stats().kv_blocks_full_peak == 4000 // BS + 1


def test_reclaim_uses_fewer_blocks_than_keeping_every_layer():
    peaks = {}
    for reclaim in (True, False):
        e = gemma(sliding_window_reclaim=reclaim, max_num_batched_tokens=512)
        e.add_request("long", ids(9, 6000), greedy(2))
        drain(e)
        s = e.stats()
        peaks[reclaim] = s.kv_blocks_full_peak + s.kv_blocks_sliding_peak
    blocks = -(-6001 // BS)
    assert peaks[False] == GROUPS * blocks
    assert peaks[True] < peaks[False] / 3


def test_snapshots_are_counted_and_reported():
    e = gemma(debug_checks=True)
    session(e)
    s = e.stats()
    assert s.kv_snapshots_total >= 2 and s.kv_snapshot_blocks > 0
    assert s.kv_blocks_full == s.kv_blocks_sliding == 0  # nothing running


@pytest.mark.parametrize(
    ("policy", "after_whole", "resent", "after_long_reply"),
    [
        # The window at each prompt's end and each request's end: the next turn hits both, but a
        # resend of a whole-block prompt, capped at prompt - 1, finds no window at all.
        ("interval+selective", 1024, 0, 1024),
        # vLLM 0.32: the window at the aligned prompt - 1 only (replay_boundaries): a resend hits
        # it; a whole-block prompt's last block and a reply's blocks are computed again.
        ("replay+junction", 1008, 1008, 992),
    ],
)
@pytest.mark.slow
def test_vllm_keeps_the_window_at_prompt_minus_one_only(
    policy, after_whole, resent, after_long_reply
):
    e = gemma(prefix_cache_retention=policy, debug_checks=True)
    whole = ids(5, 1024)  # 64 whole blocks
    e.add_request("w1", whole, greedy(4))
    reply = drain(e)["w1"][0]
    assert cached(e, "w2", whole + reply + ids(6, 300)) == after_whole
    assert cached(e, "w1again", whole) == resent
    turn1 = ids(7, 1000)
    e.add_request("l1", turn1, greedy(40))  # a reply that fills two more blocks
    reply = drain(e)["l1"][0]
    assert cached(e, "l2", turn1 + reply + ids(8, 300)) == after_long_reply
