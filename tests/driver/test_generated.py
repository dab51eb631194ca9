"""A generated agentic trace replays cleanly: one `ok` record per request, in session order."""

import dataclasses

import pytest

from harness.trace.chat_form import ChatForm
from harness.trace.content import Content
from harness.trace.generate import generate
from harness.trace.model import Trace
from harness.trace.prefix import IdealPrefixCache
from harness.trace.profile import load_profile
from tests.driver.helpers import ideal_by_id, replay


def _no_think(trace: Trace) -> Trace:
    """The same trace without think time, so the test runs in seconds."""
    sessions = tuple(
        dataclasses.replace(s, turns=tuple(dataclasses.replace(t, think_s=0.0) for t in s.turns))
        for s in trace.sessions
    )
    return Trace(trace.header, sessions)


@pytest.mark.slow
async def test_generated_trace_replays_with_one_ok_record_per_request(make_server, tmp_path):
    srv = await make_server(keep_body=False)
    trace = _no_think(generate(load_profile(), seed=3, sessions=2, scale=0.02))
    result, records, manifest = await replay(
        trace, srv.url, tmp_path, concurrency=2, api="completions"
    )
    assert len(records) == trace.num_requests == result.by_status["ok"]
    assert {r["request_id"] for r in records} == {
        f"{s.id}:{k}" for s in trace.sessions for k in range(len(s.turns))
    }
    for s in trace.sessions:
        mine = [r for r in records if r["session_id"] == s.id]
        assert [r["turn"] for r in sorted(mine, key=lambda r: r["t_sent"])] == list(
            range(len(s.turns))
        )
        assert all(r["agent"] == s.agent for r in mine)
    for r in records:
        assert r["prompt_tokens"] == r["prompt_tokens_expected"]  # token-id prompts are exact
        assert r["completion_tokens"] == r["output_tokens_expected"]
        assert r["cached_tokens"] is not None
    assert sum(r["cached_tokens"] for r in records) > 0
    assert manifest["status"] == "complete"


@pytest.mark.slow
async def test_ideal_cache_matches_a_server_with_unbounded_prefix_memory(make_server, tmp_path):
    # The test server keeps every block it saw (hash chain, block 16, hits capped at prompt-1):
    # the ideal cache by construction. Sent one at a time, the two must agree exactly.
    srv = await make_server(keep_body=False)
    trace = _no_think(generate(load_profile(), seed=5, sessions=2, scale=0.02))
    trace = Trace(trace.header, tuple(s for s in trace.sessions if s.parent is None))
    trace = Trace(
        trace.header,
        tuple(
            dataclasses.replace(s, turns=tuple(dataclasses.replace(t, spawns=()) for t in s.turns))
            for s in trace.sessions
        ),
    )
    _, records, _ = await replay(
        trace, srv.url, tmp_path, concurrency=1, api="completions", salt="s1"
    )
    ideal = ideal_by_id(tmp_path)
    assert [r["cached_tokens"] for r in records] == [ideal[r["request_id"]] for r in records]
    assert sum(r["cached_tokens"] for r in records) > 0


@pytest.mark.slow
async def test_ideal_cache_equals_whole_prompt_walks_in_send_order(make_server, tmp_path):
    # The replay resumes each session's trie walk where its previous prompt ended; the result
    # must equal walking every whole prompt from the root, in send order (subagents included).
    srv = await make_server(keep_body=False)
    profile = load_profile(overrides={"subagents.probability": 1.0})  # subagents whatever the draws
    trace = _no_think(generate(profile, seed=7, sessions=3, scale=0.02))
    assert any(t.spawns for s in trace.sessions for t in s.turns)
    _, records, _ = await replay(trace, srv.url, tmp_path, concurrency=3, salt="s2")
    content, cache, ideal = Content(trace, salt="s2"), IdealPrefixCache(16), ideal_by_id(tmp_path)
    for r in sorted(records, key=lambda r: r["t_sent"]):
        segs = content.segments(r["session_id"], r["turn"])
        assert ideal[r["request_id"]] == cache.observe(segs), r["request_id"]
        assert r["prompt_tokens_expected"] == sum(g.length for g in segs)


@pytest.mark.slow
async def test_chat_prompts_of_long_sessions_are_the_trace_content(make_server, tmp_path):
    # Each turn's messages extend the previous turn's: they must still be, exactly, the whole
    # prompt the trace defines (subagent results and forks included).
    srv = await make_server()
    trace = _no_think(generate(load_profile(), seed=11, sessions=2, scale=0.02))
    assert max(len(s.turns) for s in trace.sessions) > 3
    await replay(trace, srv.url, tmp_path, concurrency=2, salt="s3", api="chat")
    content = Content(trace, salt="s3")
    assert len(srv.log) == trace.num_requests
    for e in srv.log:
        sid, turn = e["request_id"].rsplit(":", 1)
        assert e["body"]["messages"] == ChatForm(content).messages(sid, int(turn)), e["request_id"]
