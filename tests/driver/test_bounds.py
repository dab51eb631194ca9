"""Bounds stop the load where asked; phases mark records rather than dropping them."""

import pytest
from pydantic import ValidationError

from harness.driver.config import ReplayConfig
from harness.driver.load import arrivals
from tests.driver.helpers import replay, sess, trace


def three_by_three():
    return trace(*[sess(f"s{i}", [(8, 2, 0)] * 3) for i in range(3)])


@pytest.mark.slow
async def test_max_requests(server, tmp_path):
    result, records, manifest = await replay(
        three_by_three(), server.url, tmp_path, max_requests=4, concurrency=1
    )
    assert len(records) == 4 and result.stopped_by == manifest["stopped_by"] == "max_requests"
    assert [r["request_id"] for r in records] == ["s0:0", "s0:1", "s0:2", "s1:0"]


@pytest.mark.slow
async def test_max_sessions_lets_started_sessions_finish(server, tmp_path):
    result, records, _ = await replay(
        three_by_three(), server.url, tmp_path, concurrency=2, max_sessions=2
    )
    assert result.sessions_started == 2 and result.stopped_by == "max_sessions"
    assert sorted(r["request_id"] for r in records) == [
        f"s{i}:{k}" for i in (0, 1) for k in range(3)
    ]


@pytest.mark.slow
async def test_max_duration_stops_sending_and_drains(make_server, tmp_path):
    srv = await make_server(token_delay=0.01)
    tr = trace(sess("a", [(8, 2, 0.1)] * 50), sess("b", [(8, 30, 0.25)]))
    result, records, manifest = await replay(
        tr, srv.url, tmp_path, concurrency=2, max_duration=0.4, drain_s=5
    )
    assert result.stopped_by == "max_duration" and manifest["status"] == "complete"
    # nothing sent after the stop: the stop's timer fires before any later one, however late
    assert all(r["t_scheduled"] < 0.4 for r in records)
    b = next(r for r in records if r["session_id"] == "b")
    assert b["status"] == "ok" and b["t_done"] > 0.4  # in flight at the end: allowed to finish
    assert len(records) < 10


@pytest.mark.slow
async def test_drain_window_cancels_what_is_left(make_server, tmp_path):
    srv = await make_server(token_delay=0.02)
    tr = trace(sess("slow", [(8, 200, 0)]))
    result, records, manifest = await replay(
        tr, srv.url, tmp_path, concurrency=1, max_duration=0.1, drain_s=0.1
    )
    (r,) = records
    assert r["status"] == "cancelled" and r["error"]["class"] == "Cancelled"
    assert r["t_done"] >= 0.2 and 0 < len(r["chunk_times"]) < 200  # cut 0.2 s into 4 s
    assert manifest["counts"]["by_status"] == {"cancelled": 1} and result.status == "complete"


@pytest.mark.slow
async def test_warmup_requests_and_cooldown_phases(make_server, tmp_path):
    srv = await make_server(token_delay=0.001)
    tr = trace(sess("a", [(8, 2, 0.05)] * 40))
    _, records, _ = await replay(
        tr, srv.url, tmp_path, warmup_requests=2, max_duration=0.6, cooldown_s=0.2
    )
    phases = [r["phase"] for r in records]
    assert (
        phases[:2] == ["warmup", "warmup"] and phases[2] == "measure" and phases[-1] == "cooldown"
    )
    for r in records[2:]:
        assert r["phase"] == ("cooldown" if r["t_sent"] >= 0.4 else "measure")


@pytest.mark.slow
async def test_warmup_seconds(server, tmp_path):
    tr = trace(sess("a", [(8, 2, 0.04)] * 6))
    _, records, _ = await replay(tr, server.url, tmp_path, warmup_s=0.1)
    assert {r["phase"] for r in records} == {"warmup", "measure"}
    assert all((r["phase"] == "warmup") == (r["t_sent"] < 0.1) for r in records)


def test_poisson_arrivals_are_seeded_with_the_right_rate():
    sessions = trace(*[sess(f"s{i}", [(1, 1, 0)]) for i in range(4000)]).sessions
    cfg = ReplayConfig(load="open", session_rate=50.0, seed=3)
    times = [t for t, _ in arrivals(sessions, cfg)]
    assert times == [t for t, _ in arrivals(sessions, cfg)]
    assert times[0] == 0 and times == sorted(times)
    assert times[-1] / (len(times) - 1) == pytest.approx(1 / 50, rel=0.05)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"load": "open"}, "session_rate"),
        ({"concurrency": 0}, "concurrency"),
        ({"cooldown_s": 5}, "cooldown_s"),
        ({"routing": "random"}, "routing"),
        ({"max_requests": 0}, "max_requests"),
        ({"time_scale": 0}, "time_scale"),
    ],
)
def test_bad_config_names_the_field(kw, field):
    with pytest.raises(ValidationError) as err:
        ReplayConfig(**kw)
    assert err.value.errors()[0]["loc"] == (field,)


@pytest.mark.slow
async def test_phase_follows_the_t_sent_the_record_keeps(make_server, tmp_path):
    """A request that waits for a connection is sent when it is written: its phase is decided by
    that `t_sent`, not by when the driver asked for it."""
    srv = await make_server(token_delay=0.02)
    tr = trace(sess("a", [(8, 12, 0.0)]), sess("b", [(8, 12, 0.0)]))
    _, records, _ = await replay(
        tr,
        srv.url,
        tmp_path,
        max_duration=2.0,
        cooldown_s=1.85,
        cycle_trace=False,
        target_kw={"max_connections": 1},
    )
    assert len(records) == 2 and all(r["status"] == "ok" for r in records)
    late = max(records, key=lambda r: r["t_sent"])
    assert late["t_sent"] >= 0.15  # it waited for the first request's connection
    for r in records:
        assert r["phase"] == ("cooldown" if r["t_sent"] >= 0.15 else "measure")
