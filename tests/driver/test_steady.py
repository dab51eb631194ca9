"""Steady-state load: the closed loop holds N for the whole run, cycling the trace with fresh
content; mid-trajectory start; agent-like retries through a server restart."""

import asyncio
from collections import defaultdict

import pytest

from harness.analysis.ideal.walk import with_ideal
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze_run
from harness.driver.retry import RetryPolicy
from harness.driver.target import Timeouts
from harness.trace.cycles import split_cycled_id
from tests.driver.helpers import by_id, replay, sess, trace
from tests.driver.sse_server import ServerConfig, SSETestServer


def _mixed_trace():
    """Tasks of different lengths (one with subagents): without refilling, load decays. As in
    generated traces, a session's first turn goes at its start (no think time before it)."""
    return trace(
        sess("a", [(16, 4, 0)] + [(16, 4, 0.02)]),
        sess("b", [(16, 4, 0)] + [(16, 4, 0.02)] * 5),
        sess("c", [(16, 4, 0), (8, 4, 0.02, ["c.sub"]), (8, 4, 0.02)]),
        sess("c.sub", [(8, 4, 0.02)] * 3, parent="c", fork_turn=1, mode="fork"),
        sess("d", [(24, 4, 0)] + [(24, 4, 0.02)] * 3),
    )


@pytest.mark.slow
async def test_the_closed_loop_holds_its_concurrency_until_max_duration(make_server, tmp_path):
    srv = await make_server(token_delay=0.002)
    result, records, _ = await replay(
        _mixed_trace(), srv.url, tmp_path, concurrency=3, max_duration=2.0, salt="run"
    )
    assert result.stopped_by == "max_duration"
    cycles = {split_cycled_id(r["session_id"])[1] for r in records}
    assert len(cycles) >= 3  # the trace ran out and was drawn again
    window = analyze_run(tmp_path)["window"]
    assert window["target_tasks"] == 3 and abs(window["tasks_held"] - 1) < 0.05


@pytest.mark.slow
async def test_without_max_duration_the_trace_runs_once(server, tmp_path):
    _, records, _ = await replay(_mixed_trace(), server.url, tmp_path, concurrency=3)
    assert len(records) == 2 + 6 + 3 + 3 + 4
    assert all(split_cycled_id(r["session_id"])[1] == 0 for r in records)


@pytest.mark.slow
async def test_a_new_cycle_hits_only_its_own_cycle(make_server, tmp_path):
    """Cycle 2's ideal hit equals cycle 1's: a fresh salt per cycle, nothing shared across."""
    srv = await make_server(token_delay=0.002)
    await replay(_mixed_trace(), srv.url, tmp_path, concurrency=2, max_duration=2.5, salt="run")
    recs, _ = with_ideal(load_run(tmp_path))
    recs["cycle"] = [split_cycled_id(s)[1] for s in recs["session_id"]]
    per_cycle = recs.groupby("cycle").agg(
        n=("request_id", "size"),
        ideal=("cached_tokens_ideal", "sum"),
        server=("cached_tokens", "sum"),
        prompt=("prompt_tokens", "sum"),
    )
    full = per_cycle[per_cycle["n"] == 2 + 6 + 3 + 3 + 4]
    assert len(full) >= 2
    assert full["ideal"].nunique() == 1 and full["prompt"].nunique() == 1
    assert full["server"].nunique() == 1  # the server saw no cross-cycle prefix either
    assert full["ideal"].iloc[0] > 0  # within a cycle, turns share their context


@pytest.mark.slow
async def test_mid_trajectory_start_sends_the_history_as_warmup(server, tmp_path):
    tr = trace(*[sess(f"s{i}", [(16, 4, 0)] + [(16, 4, 0.01)] * 7) for i in range(4)])
    _, records, _ = await replay(
        tr, server.url, tmp_path, concurrency=4, mid_trajectory=True, seed=3
    )
    turns = defaultdict(list)
    for r in records:
        turns[r["session_id"]].append(r)
    starts = []
    for sid, recs in turns.items():
        recs.sort(key=lambda r: r["t_sent"])
        first = next(r["turn"] for r in recs if r["phase"] == "measure")
        measured = [r["turn"] for r in recs if r["phase"] == "measure"]
        assert measured == list(range(first, 8)), sid
        warm = [r for r in recs if r["phase"] == "warmup"]
        if first:  # one warm-up request: the previous turn's prompt, one output token
            assert [(r["turn"], r["completion_tokens"]) for r in warm] == [(first - 1, 1)]
            assert recs[0] is warm[0]
            # the first measured turn finds that context in the server's cache
            assert recs[1]["cached_tokens"] >= (warm[0]["prompt_tokens"] - 1) // 16 * 16
        else:
            assert warm == []
        starts.append(first)
    assert len(set(starts)) > 1 and max(starts) > 0  # random, seeded start turns


@pytest.mark.slow
async def test_mid_trajectory_history_is_one_request_without_earlier_subagents(server, tmp_path):
    tr = trace(
        sess("c", [(16, 4, 0), (8, 4, 0.01, ["c.sub"]), (8, 4, 0.01)]),
        sess("c.sub", [(8, 4, 0.01)] * 3, parent="c", fork_turn=1, mode="fork"),
    )
    _, records, _ = await replay(
        tr, server.url, tmp_path, concurrency=1, mid_trajectory=True, seed=3
    )  # turn 2
    assert {r["request_id"]: r["phase"] for r in records} == {"c:1": "warmup", "c:2": "measure"}


@pytest.mark.slow
async def test_retries_carry_every_turn_through_a_server_restart(tmp_path):
    srv = SSETestServer(ServerConfig(token_delay=0.002))
    url = await srv.start()
    tr = trace(*[sess(f"s{i}", [(16, 4, 0.05)] * 12) for i in range(3)])
    policy = RetryPolicy(attempts=40, backoff_s=0.05, max_backoff_s=0.3)

    async def restart() -> None:
        await asyncio.sleep(0.4)
        await srv.stop()  # connections refused from now on
        await asyncio.sleep(1.5)
        await srv.start(srv.port)

    outage = asyncio.create_task(restart())
    try:
        result, records, _ = await replay(
            tr,
            url,
            tmp_path,
            concurrency=3,
            retry=policy,
            target_kw={"timeouts": Timeouts(connect=5, ttft=10, idle=5, total=30)},
        )
    finally:
        await outage
        await srv.stop()
    final = {}
    failed = [r for r in records if r["status"] != "ok"]
    for r in sorted(records, key=lambda r: r["attempt"]):
        final[(r["session_id"], r["turn"])] = r
    assert len(final) == 36 and all(r["status"] == "ok" for r in final.values()), [
        (r["request_id"], r["error"]) for r in final.values() if r["status"] != "ok"
    ]
    assert failed and {r["error"]["class"] for r in failed} <= {"ConnectError", "ConnectionClosed"}
    for r in failed:  # each failed attempt has its own record, and a later attempt followed it
        later = by_id(records)[f"{r['session_id']}:{r['turn']}#{r['attempt'] + 1}"]
        assert later["t_scheduled"] >= r["t_done"] + 0.8 * 0.05
    s = analyze_run(tmp_path)
    assert s["requests_ok"] == 36 and s["requests_failed"] == 0
    assert (
        s["retries"]["attempts_retried"] == len(failed)
        and s["retries"]["turns_recovered"] == s["retries"]["turns_retried"]
    )


@pytest.mark.slow
async def test_retries_are_off_by_default(make_server, tmp_path):
    srv = await make_server()
    _, records, _ = await replay(trace(sess("fault-http429-x", [(8, 4, 0)])), srv.url, tmp_path)
    assert [(r["status"], r["attempt"]) for r in records] == [("error", 1)]
