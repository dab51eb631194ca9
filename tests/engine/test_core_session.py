"""A trace's sessions replayed through the engine: cached_tokens covers each turn's shared prefix."""

from __future__ import annotations

import pytest

from harness.engine.engine import LLMEngine
from harness.trace.content import Content
from harness.trace.model import Session, Trace, TraceHeader, Turn
from harness.trace.prefix import IdealPrefixCache

from .conftest import drain, greedy, tiny

pytestmark = pytest.mark.slow  # seconds to a minute each on 2 cores: `tox -e fast` skips it


def small_trace() -> Trace:
    turns = (Turn(40, 7), Turn(25, 9), Turn(60, 5), Turn(18, 6))
    sessions = (
        Session("main", 0.0, system_tokens=70, system_id="sys", turns=turns),
        Session("other", 0.0, system_tokens=70, system_id="sys", turns=turns[:2]),
        Session(
            "fork",
            0.0,
            system_tokens=0,
            system_id="sys",
            turns=(Turn(30, 4),),
            parent="main",
            fork_turn=1,
            mode="fork",
        ),
    )
    return Trace(TraceHeader(seed=3, block_size=16), sessions)


def replay(
    engine: LLMEngine, trace: Trace, ideal: IdealPrefixCache
) -> list[tuple[str, int, int, int]]:
    """Send each turn after the previous one ends; (session, turn, cached, ideal) per request."""
    content = Content(trace)
    rows = []
    for s in trace.sessions:
        for k, turn in enumerate(s.turns):
            rid = f"{s.id}/{k}/{len(rows)}"
            engine.add_request(rid, content.prompt_token_ids(s.id, k), greedy(turn.output_tokens))
            final = drain(engine)[rid][1]
            assert final.prompt_tokens == content.prompt_length(s.id, k)
            assert final.completion_tokens == turn.output_tokens
            rows.append((s.id, k, final.cached_tokens, ideal.observe(content.segments(s.id, k))))
    return rows


def test_replayed_twice_cached_tokens_cover_the_shared_prefix(shared_runner):
    trace, ideal = small_trace(), IdealPrefixCache(16)
    engine = LLMEngine(tiny(), runner=shared_runner)
    first = replay(engine, trace, ideal)
    second = replay(engine, trace, ideal)
    # With room for everything, the engine's hits are exactly the ideal cache's.
    assert [r[2] for r in first + second] == [r[3] for r in first + second]
    # Every turn after the first of a session hits at least the previous prompt, block-aligned.
    content = Content(trace)
    for sid, k, cached, _ in first:
        if k > 0:
            assert cached >= content.prompt_length(sid, k - 1) // 16 * 16
    # The second replay hits every prompt but its last (partial) block.
    for sid, k, cached, _ in second:
        assert cached == (content.prompt_length(sid, k) - 1) // 16 * 16
    assert first[4][0] == "other" and first[4][2] == 64  # the shared system prompt, 4 blocks
