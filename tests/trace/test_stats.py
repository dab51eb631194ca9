"""Statistics against values computed by hand on tiny traces."""

import pytest

from harness.trace.lru import LruPrefixCache
from harness.trace.model import Session
from harness.trace.stats import compute_stats, dist
from harness.trace.timeline import send_order

from .tiny import make_trace, turn

# A: system 32 + in 16 -> 48; then + out 16 + in 16 -> 80.  B (same system): 32 + 16 -> 48.
A = Session("A", 0.0, 32, "sys", (turn(16, 16), turn(16, 8, think=1.0)))
B = Session("B", 5.0, 32, "sys", (turn(16, 16),))


def test_ideal_hit_token_weighted_by_hand():
    stats = compute_stats(make_trace(A, B), block_size=16)
    # A0 hits nothing, A1 hits A0's 48 tokens, B0 hits the shared system prompt (32).
    assert stats["requests"] == 3
    assert stats["prompt_tokens"]["mean"] == pytest.approx((48 + 80 + 48) / 3)
    assert stats["ideal_cache_hit"] == pytest.approx((0 + 48 + 32) / 176)


def test_ideal_hit_floors_to_whole_blocks():
    stats = compute_stats(make_trace(A, B), block_size=20)
    # A1 shares 48 -> 40 (two blocks of 20); B0 shares 32 -> 20.
    assert stats["ideal_cache_hit"] == pytest.approx((40 + 20) / 176)


def test_lru_hit_by_hand():
    # 40 tokens: after A0 (48) the tail (A's input) is evicted, so A1 hits only the system
    # prompt (32); A1 leaves 80 resident, evicted down to the system prompt; B0 hits 32.
    stats = compute_stats(make_trace(A, B), block_size=16, cache_tokens=40)
    assert stats["lru_cache_hit"] == pytest.approx((0 + 32 + 32) / 176)
    # A cache big enough for everything equals the ideal cache.
    big = compute_stats(make_trace(A, B), block_size=16, cache_tokens=10_000)
    assert big["lru_cache_hit"] == pytest.approx(big["ideal_cache_hit"])
    zero = compute_stats(make_trace(A, B), block_size=16, cache_tokens=0)
    assert zero["lru_cache_hit"] == 0


def test_lru_evicts_least_recently_used_prefix_first():
    from harness.trace.content import Segment

    def prompt(*names):
        return [Segment((n,), 16, "user") for n in names]

    cache = LruPrefixCache(capacity_tokens=48, block_size=16)
    assert cache.observe(prompt("s", "x")) == 0
    assert cache.observe(prompt("s", "y")) == 16  # s, x, y resident (48)
    assert cache.observe(prompt("s", "z", "w")) == 16  # evicts x then y (oldest tails)
    assert cache.observe(prompt("s", "x")) == 16  # x is gone, s stayed hot
    assert cache.observe(prompt("s", "x", "q")) == 32


def test_fork_child_hits_parent_prompt_and_subagent_counts():
    parent = Session("P", 0.0, 32, "sys", (turn(16, 16, spawns=("P.a1", "P.a2")), turn(48, 16)))
    fork = Session("P.a1", 0.0, 32, "sys", (turn(16, 16),), parent="P", fork_turn=0, mode="fork")
    spawn = Session("P.a2", 0.0, 32, "sys", (turn(16, 16),), parent="P", fork_turn=0, mode="spawn")
    lone = Session("L", 9.0, 32, "sys", (turn(16, 16),))
    trace = make_trace(parent, fork, spawn, lone)
    assert [(s, k) for _, s, k in send_order(trace)] == [
        ("P", 0),
        ("P.a1", 0),
        ("P.a2", 0),
        ("P", 1),
        ("L", 0),
    ]
    stats = compute_stats(trace, block_size=16)
    # P0 48:0. a1 = P0 + out 16 + in 16 = 80: hits 48. a2 = 32 + 16: hits 32.
    # P1 = 48 + 16 + 48 (join: both reports 16 + 16, then 16 own) = 112: hits P0 + P's output
    # (which a1 sent) = 64. L0 48: hits 32.
    assert stats["ideal_cache_hit"] == pytest.approx(
        (0 + 48 + 32 + 64 + 32) / (48 + 80 + 48 + 112 + 48)
    )
    assert stats["main_sessions"] == 2 and stats["sessions"] == 4
    assert stats["main_sessions_with_subagents"] == 0.5
    assert stats["subagents_per_parent"] == 2.0
    assert stats["turns_per_main_session"]["p50"] == 1.5
    # by agent: main P0, P1, L0 hit 0 + 64 + 32 of 48 + 112 + 48; subagents 48 + 32 of 80 + 48
    main, sub = stats["by_agent"]["main"], stats["by_agent"]["sub"]
    assert (main["requests"], sub["requests"]) == (3, 2)
    assert main["prompt_tokens"] == 208 and sub["prompt_tokens"] == 128
    assert main["ideal_cache_hit"] == pytest.approx(96 / 208)
    assert sub["ideal_cache_hit"] == pytest.approx(80 / 128)
    assert (main["output_tokens"], sub["output_tokens"]) == (48, 32)


def test_dist_and_fidelity_rows():
    d = dist([1, 2, 3, 4, 100])
    assert (d["count"], d["p50"], d["mean"]) == (5, 3.0, 22.0)
    assert dist([])["p50"] is None
    stats = compute_stats(make_trace(A, B))
    rows = {r["key"]: r for r in stats["fidelity"]}
    assert rows["ideal_cache_hit"]["met"] is False
    assert rows["output_tokens"]["value"] == 16.0
    assert len(stats["fidelity"]) == 8
    think = [r for r in stats["fidelity"] if r["key"] == "think_s"]
    assert [r["target"] for r in think] == ["10 ± 10%", "166 ± 10%"]
    assert [r["value"] for r in think] == [1.0, 1.0] and not any(r["met"] for r in think)


@pytest.mark.slow
def test_incremental_walks_equal_full_prompt_walks():
    from harness.trace.content import Content
    from harness.trace.prefix import IdealPrefixCache

    from .tiny import small_generated

    trace = small_generated(sessions=8, **{"subagents.mode": "mix"})
    content, ideal, lru = Content(trace), IdealPrefixCache(16), LruPrefixCache(3000, 16)
    hits, lru_hits, total = 0, 0, 0
    for _, sid, k in send_order(trace):
        segs = content.segments(sid, k)
        total += sum(s.length for s in segs)
        hits += ideal.observe(segs)
        lru_hits += lru.observe(segs)
    stats = compute_stats(trace, block_size=16, cache_tokens=3000)
    assert stats["ideal_cache_hit"] == pytest.approx(hits / total)
    assert stats["lru_cache_hit"] == pytest.approx(lru_hits / total)
    assert 0 < stats["lru_cache_hit"] < stats["ideal_cache_hit"]


def _random_block_trace(seed: int, block: int = 8):
    """Block-mode sessions that grow, rewrite their partial last block, fork off shared prefixes,
    and sometimes carry fewer ids than their prompt needs (a private tail)."""
    import numpy as np

    from harness.trace.blocks import block_turns
    from harness.trace.model import Trace, TraceHeader

    rng = np.random.default_rng(seed)
    sessions, fresh = [], iter(range(1000, 10**6))
    for i in range(6):
        ids = [1, 2, 3][: int(rng.integers(0, 4))] + [
            next(fresh)
        ]  # sessions share a "system prompt"
        rows, n_in = [], len(ids) * block - int(rng.integers(0, block))
        for _ in range(int(rng.integers(1, 9))):
            rows.append((n_in, int(rng.integers(1, 20)), float(rng.integers(0, 3)), list(ids)))
            if rng.random() < 0.3:
                ids = ids[: int(rng.integers(1, len(ids) + 1))]  # the context was cut back
            if rng.random() < 0.5:
                ids[-1] = next(fresh)  # the partial last block changed
            ids += [next(fresh) for _ in range(int(rng.integers(0, 4)))]
            n_in = max(
                1, len(ids) * block - int(rng.integers(0, block)) + int(rng.integers(0, 3)) * block
            )
        sessions.append(Session(f"r{i}", float(rng.integers(0, 4)), 0, "none", block_turns(rows)))
    return Trace(TraceHeader(profile="blocks", block_size=block), tuple(sessions))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("cache_tokens", [0, 40, 200, 10**6])
def test_block_walks_equal_segment_caches(seed, cache_tokens):
    from harness.trace.content import Content
    from harness.trace.prefix import IdealPrefixCache

    trace = _random_block_trace(seed)
    content, ideal, lru = Content(trace), IdealPrefixCache(4), LruPrefixCache(cache_tokens, 4)
    hits, lru_hits, total = 0, 0, 0
    for _, sid, k in send_order(trace):
        segs = content.segments(sid, k)  # every block a segment, walked from the start
        total += sum(s.length for s in segs)
        hits += ideal.observe(segs)
        lru_hits += lru.observe(segs)
    stats = compute_stats(trace, block_size=4, cache_tokens=cache_tokens)
    assert stats["ideal_cache_hit"] == pytest.approx(hits / total, abs=1e-12)
    assert stats["lru_cache_hit"] == pytest.approx(lru_hits / total, abs=1e-12)
    assert hits > 0
