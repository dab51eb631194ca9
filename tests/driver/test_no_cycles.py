"""A finished request leaves no reference cycle: its watchdog, parser and response are freed by
reference counting when it ends, not kept for the cyclic collector's next full collection (at
256 paced streams that garbage was ~30 objects a request, all promoted to the oldest generation
before it became garbage, and its full collections a cost per token)."""

from __future__ import annotations

import gc

from harness.driver.http.target import HTTPTarget, _Parsing
from harness.driver.http.watchdog import Watchdog
from harness.driver.http.wire import Response
from harness.driver.recorder import collect
from harness.driver.target import RequestSpec
from harness.schema import new_record
from tests.driver.helpers import target
from tests.gc_spy import note_threshold


def _spec(i: int) -> RequestSpec:
    sid = f"s{i}"
    messages = [{"role": "user", "content": "hello there"}]
    return RequestSpec(
        request_id=f"{sid}:0",
        session_id=sid,
        sticky_key=sid,
        endpoint=0,
        max_tokens=4,
        prompt_tokens=2,
        messages=messages,
    )


def _alive(*types: type) -> list[object]:
    return [o for o in gc.get_objects() if type(o) in types]


async def _requests(tgt: HTTPTarget, n: int) -> list[str]:
    statuses = []
    for i in range(n):
        rec = await collect(tgt, _spec(i), new_record(), 0.0)
        statuses.append(rec["status"])
    return statuses


async def test_a_finished_request_leaves_no_cycle_behind(server):
    tgt = target(server.url)
    await tgt.start()
    try:
        gc.collect()
        gc.disable()  # what is left now is what reference counting did not free
        try:
            assert await _requests(tgt, 3) == ["ok"] * 3
            left = _alive(Watchdog, Response, _Parsing)
        finally:
            gc.enable()
    finally:
        await tgt.close()
    assert left == []


async def test_a_live_replay_collects_young_objects_rarely_and_puts_the_collector_back(
    server, tmp_path, monkeypatch
):
    # with no cycle a request, a young collection at CPython's default (700) only moved the
    # in-flight requests' objects on; the replay raises the threshold and restores it after
    from harness import collector
    from harness.driver import replay_into
    from tests.driver.helpers import replay, sess, trace

    seen: list[int] = []
    note_threshold(monkeypatch, replay_into.Replay, "run", seen)
    before = gc.get_threshold(), gc.get_freeze_count()
    _, recs, _ = await replay(trace(sess("a", [(8, 2, 0)])), server.url, tmp_path)
    assert [r["status"] for r in recs] == ["ok"]
    assert seen == [collector.REALTIME_GEN0]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
