"""Replay is faithful to the trace: order, think times, fork/join, content, cache accounting.

Times are checked by what must come before what (a send after its schedule, a first token
after the server wrote it): how late a loaded machine sends is not a test's to bound; that each
send goes exactly on time when the loop is never late is checked on simulated time
(test_virtual_clock.py)."""

import pytest

from harness.trace.chat_form import ChatForm
from harness.trace.content import Content
from tests.driver.helpers import by_id, ideal_by_id, replay, sess, trace


@pytest.mark.slow
async def test_turns_in_order_after_think_time(server, tmp_path):
    tr = trace(sess("a", [(8, 4, 0.0), (8, 4, 0.1), (8, 4, 0.2)]))
    _, records, _ = await replay(tr, server.url, tmp_path)
    assert [r["turn"] for r in records] == [0, 1, 2]
    assert all(r["status"] == "ok" for r in records)
    for prev, cur, think in zip(records, records[1:], (0.1, 0.2), strict=False):
        assert cur["t_scheduled"] == pytest.approx(prev["t_done"] + think, abs=2e-6)
        assert cur["t_scheduled"] <= cur["t_sent"]
    for r in records:
        assert r["t_sent"] <= r["t_first_token"] <= r["t_last_token"] <= r["t_done"]
        assert (
            sum(r["chunk_tokens"]) == 4 == r["completion_tokens"]
            and 1 <= len(r["chunk_times"]) <= 4
        )
        assert (
            r["t_first_token"] == r["chunk_times"][0] and r["t_last_token"] == r["chunk_times"][-1]
        )


def family():
    return trace(
        sess("p", [(8, 4, 0, ["p.fork", "p.spawn"]), (8, 4, 0)]),
        sess("p.fork", [(8, 20, 0), (8, 20, 0.05)], parent="p", fork_turn=0, mode="fork"),
        sess("p.spawn", [(8, 20, 0)], parent="p", mode="spawn"),
    )


@pytest.mark.slow
async def test_fork_and_join(server, tmp_path):
    _, records, _ = await replay(family(), server.url, tmp_path)
    r = by_id(records)
    assert len(r) == 5
    spawn_end = r["p:0"]["t_done"]
    for kid in ("p.fork:0", "p.spawn:0"):
        assert (
            r[kid]["t_sent"] >= spawn_end
            and r[kid]["agent"] == "sub"
            and r[kid]["parent_session_id"] == "p"
        )
        assert r[kid]["t_scheduled"] == pytest.approx(spawn_end, abs=2e-6)
    # the subagents ran at the same time
    assert (
        r["p.spawn:0"]["t_sent"] < r["p.fork:0"]["t_done"]
        and r["p.fork:0"]["t_sent"] < r["p.spawn:0"]["t_done"]
    )
    join = max(r["p.fork:1"]["t_done"], r["p.spawn:0"]["t_done"])
    assert r["p:1"]["t_sent"] >= join and r["p:1"]["t_scheduled"] >= join
    assert r["p:0"]["agent"] == "main" and r["p:0"]["parent_session_id"] is None


def _join(think: float):
    """A parent whose join turn thinks `think` s; its subagent runs about 0.4 s (two 0.2 s pauses)."""
    return trace(
        sess("p", [(8, 4, 0, ["p.a1"]), (8, 4, think)]),
        sess("p.a1", [(8, 4, 0.2), (8, 4, 0.2)], parent="p", mode="spawn"),
    )


@pytest.mark.parametrize("think", [0.1, 1.0])
@pytest.mark.slow
async def test_a_join_waits_only_for_what_is_left_of_its_think_time(server, tmp_path, think):
    # The think timer runs from the spawning turn's end, beside the subagent (the Weka corpora's
    # join `think_time` includes the subagents' run time): the join goes at whichever is later.
    _, records, _ = await replay(_join(think), server.url, tmp_path)
    r = by_id(records)
    spawn_end, sub_end = r["p:0"]["t_done"], r["p.a1:1"]["t_done"]
    assert sub_end - spawn_end > 0.4
    expected = max(spawn_end + think, sub_end)
    assert r["p:1"]["t_scheduled"] == pytest.approx(expected, abs=0.02)
    assert expected <= r["p:1"]["t_sent"]


@pytest.mark.slow
async def test_closed_loop_holds_its_concurrency(server, tmp_path):
    tr = trace(*[sess(f"s{i}", [(8, 30, 0)]) for i in range(6)])
    result, records, _ = await replay(tr, server.url, tmp_path, concurrency=2)
    assert result.sessions_started == 6 and len(records) == 6
    events = sorted([(r["t_sent"], 1) for r in records] + [(r["t_done"], -1) for r in records])
    level, peak = 0, 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert peak == 2


@pytest.mark.slow
async def test_open_loop_constant_rate(server, tmp_path):
    tr = trace(*[sess(f"s{i}", [(8, 2, 0)]) for i in range(5)])
    _, records, _ = await replay(
        tr, server.url, tmp_path, load="open", session_rate=20, arrival="constant"
    )
    firsts = sorted(r["t_scheduled"] for r in records)
    assert firsts == pytest.approx([0, 0.05, 0.1, 0.15, 0.2], abs=1e-9)
    assert all(r["t_sent"] >= r["t_scheduled"] for r in records)


@pytest.mark.slow
async def test_timestamps_with_time_scale(server, tmp_path):
    tr = trace(*[sess(f"s{i}", [(8, 2, 0)], arrival=10 + i) for i in (2, 0, 1)])
    _, records, _ = await replay(tr, server.url, tmp_path, load="timestamps", time_scale=0.1)
    sched = {r["session_id"]: r["t_scheduled"] for r in records}
    assert sched == pytest.approx({"s0": 0.0, "s1": 0.1, "s2": 0.2}, abs=1e-9)
    assert [r["session_id"] for r in sorted(records, key=lambda r: r["t_sent"])] == [
        "s0",
        "s1",
        "s2",
    ]


def hand_built():
    return trace(
        sess("a", [(10, 5, 0), (10, 5, 0), (20, 5, 0, ["a.f"])]),
        sess("a.f", [(6, 3, 0)], parent="a", fork_turn=0, mode="fork"),
        sess("b", [(3, 2, 0)]),
    )


@pytest.mark.slow
async def test_cached_tokens_ideal_and_reported(server, tmp_path):
    _, records, _ = await replay(hand_built(), server.url, tmp_path, block_size=16)
    r = by_id(records)
    # a:0 prompt 32+10=42 (nothing earlier); a:1 57 shares 42; a:2 82 shares 57;
    # a.f:0 = a's context at turn 0 (42) + out(5) + 6 shares 42; b:0 35 shares the system 32.
    expected = {"a:0": 0, "a:1": 32, "a:2": 48, "a.f:0": 32, "b:0": 32}
    assert ideal_by_id(tmp_path) == expected  # the analyzer's, at the run's block size
    # recomputed at another block size from the same folder
    assert ideal_by_id(tmp_path, 8) == {"a:0": 0, "a:1": 40, "a:2": 56, "a.f:0": 40, "b:0": 32}
    assert all(v["cached_tokens_ideal"] is None for v in r.values())  # the driver sends and records
    assert r["a:2"]["prompt_tokens_expected"] == 82
    logged = {e["request_id"]: e["cached_tokens"] for e in server.log}
    assert {k: v["cached_tokens"] for k, v in r.items()} == logged  # read from usage
    assert r["a:1"]["cached_tokens"] > 0


@pytest.mark.slow
async def test_recorded_history_sends_the_trace_content(server, tmp_path):
    tr = hand_built()
    await replay(tr, server.url, tmp_path, api="chat")
    content = Content(tr)
    for e in server.log:
        sid, turn = e["request_id"].rsplit(":", 1)
        assert e["body"]["messages"] == ChatForm(content).messages(sid, int(turn))


@pytest.mark.slow
async def test_live_history_uses_the_replies(server, tmp_path):
    tr = trace(sess("a", [(8, 4, 0), (8, 3, 0), (8, 2, 0)]))
    await replay(tr, server.url, tmp_path, history="live", api="chat")
    last = server.log[-1]["body"]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last[2]["content"] == " x0 x1 x2 x3" and last[4]["content"] == " x0 x1 x2"


@pytest.mark.parametrize("fmt", ["tokens", "text"])
@pytest.mark.slow
async def test_completions_prompts(server, tmp_path, fmt):
    tr = hand_built()
    _, records, _ = await replay(tr, server.url, tmp_path, api="completions", prompt_format=fmt)
    assert all(r["status"] == "ok" for r in records)
    content = Content(tr)
    for e in server.log:
        sid, turn = e["request_id"].rsplit(":", 1)
        want = (
            content.prompt_token_ids(sid, int(turn))
            if fmt == "tokens"
            else content.prompt_text(sid, int(turn))
        )
        assert e["path"] == "/v1/completions" and e["body"]["prompt"] == want


@pytest.mark.slow
async def test_request_body_and_headers(server, tmp_path):
    tkw = {
        "session_id_field": "session_id",
        "api_key": "sk-test-123",
        "headers": {"X-Extra": "1"},
    }
    await replay(family(), server.url, tmp_path, target_kw=tkw)
    for e in server.log:
        b = e["body"]
        assert b["stream"] is True and b["stream_options"] == {"include_usage": True}
        assert b["min_tokens"] == b["max_tokens"] and b["ignore_eos"] is True
        assert b["session_id"] == e["session_id"] == "p"  # subagents follow their root
        assert e["authorization"] == "Bearer sk-test-123"
    assert sorted(e["body"]["max_tokens"] for e in server.log) == [4, 4, 20, 20, 20]
    text = (tmp_path / "records.jsonl").read_text() + (tmp_path / "manifest.json").read_text()
    assert "sk-test-123" not in text


@pytest.mark.slow
async def test_optional_fields_can_be_left_out(server, tmp_path):
    tkw = {"send_min_tokens": False, "send_ignore_eos": False}
    await replay(family(), server.url, tmp_path, follow_parent=False, target_kw=tkw)
    assert all("min_tokens" not in e["body"] and "ignore_eos" not in e["body"] for e in server.log)
    assert {e["session_id"] for e in server.log} == {"p", "p.fork", "p.spawn"}


@pytest.mark.slow
async def test_continuous_usage_counts_tokens_per_chunk(server, tmp_path):
    _, records, _ = await replay(
        family(), server.url, tmp_path, target_kw={"continuous_usage": True}
    )
    for r in records:
        assert (
            r["status"] == "ok"
            and sum(r["chunk_tokens"]) == r["completion_tokens"] == r["output_tokens_expected"]
        )


@pytest.mark.slow
async def test_live_history_reaches_forked_subagents(server, tmp_path):
    tr = trace(
        sess("p", [(8, 3, 0, ["p.f"]), (8, 2, 0)]),
        sess("p.f", [(8, 2, 0), (8, 2, 0)], parent="p", fork_turn=0, mode="fork"),
    )
    await replay(tr, server.url, tmp_path, history="live", api="chat")
    bodies = {e["request_id"]: e["body"]["messages"] for e in server.log}
    assert [m["content"] for m in bodies["p.f:0"] if m["role"] == "assistant"] == [" x0 x1 x2"]
    assert [m["content"] for m in bodies["p.f:1"] if m["role"] == "assistant"] == [
        " x0 x1 x2",
        " x0 x1",
    ]
    assert [m["content"] for m in bodies["p:1"] if m["role"] == "assistant"] == [" x0 x1 x2"]


@pytest.mark.slow
async def test_ttft_follows_the_servers_uncached_work(make_server, tmp_path):
    srv = await make_server(ttft_per_token=0.001)  # 1 ms per prompt token not in its cache
    tr = trace(sess("a", [(8, 2, 0), (8, 2, 0)], system=300))
    _, records, manifest = await replay(tr, srv.url, tmp_path)
    ttft = [r["t_first_token"] - r["t_sent"] for r in records]
    served = [
        (e["t_first_token"] - e["t_recv"], e["prompt_tokens"] - e["cached_tokens"]) for e in srv.log
    ]
    assert ttft[0] >= 0.3  # all 300+ tokens computed
    assert served[0][1] >= 300 and served[1][1] <= 16  # the prefix was cached: 8 new tokens
    assert records[1]["cached_tokens"] >= 288
    # the client's TTFT holds the server's, from its send to the first token it read, and the
    # first is read before the server got the next turn (sent after the first's end)
    assert all(client >= own for client, (own, _) in zip(ttft, served, strict=True))
    t0 = manifest["t0_perf_counter"]
    assert t0 + records[0]["t_first_token"] <= srv.log[1]["t_recv"]


@pytest.mark.slow
async def test_chunk_times_are_causal_against_the_servers_clock(make_server, tmp_path):
    # Server and client share time.perf_counter here: no token may be seen before it was sent,
    # nor after the server got the session's next turn (sent once this one ended).
    srv = await make_server(token_delay=0.002)
    tr = trace(*[sess(f"s{i}", [(8, 20, 0)] * 2) for i in range(4)])
    _, records, manifest = await replay(tr, srv.url, tmp_path, concurrency=4)
    t0 = manifest["t0_perf_counter"]
    served = {e["request_id"]: e for e in srv.log}
    for r in records:
        assert r["chunk_times"] == sorted(r["chunk_times"])
        seen = t0 + r["t_first_token"]
        assert seen >= served[r["request_id"]]["t_first_token"]
        if r["turn"] == 0:
            assert seen <= served[f"{r['session_id']}:1"]["t_recv"]


@pytest.mark.slow  # reads the standard library's index: ~1 CPU-s
async def test_code_content_is_loaded_before_the_clock_starts(server, tmp_path, monkeypatch):
    # the standard library's index (~0.4 s) was read by the first prompt, inside the run: every
    # code-content run's first sends were that late
    from harness.driver import clock
    from harness.driver import replay as replay_module
    from harness.trace import code_text
    from harness.trace.model import Trace, TraceHeader

    code_text.corpus.cache_clear()
    loaded: list[float] = []
    real = code_text.corpus

    def noting():
        loaded.append(clock.now())
        return real()

    monkeypatch.setattr(code_text, "corpus", noting)
    starts: list[float] = []
    run = replay_module.Replay.run

    async def run_noting(self, t0=None):
        result = await run(self, t0)
        starts.append(self.t0)
        return result

    monkeypatch.setattr(replay_module.Replay, "run", run_noting)
    tr = trace(sess("a", [(8, 4, 0.0)]))
    tr = Trace(TraceHeader(seed=7, meta={"knobs": {"content": "code"}}), tr.sessions)
    _, records, _ = await replay(tr, server.url, tmp_path)
    assert [r["status"] for r in records] == ["ok"]
    assert loaded and loaded[0] < starts[0]
