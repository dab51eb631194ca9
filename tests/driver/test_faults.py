"""A misbehaving server costs one record per request, with the right status and reason."""

import pytest

from harness.driver.config import ReplayConfig
from harness.driver.recorder import Recorder
from harness.driver.replay import Replay
from harness.driver.target import Timeouts
from harness.errors import TargetError
from tests.driver.helpers import by_id, load_manifest, load_records, replay, sess, target, trace

FAULTS = {
    # fault mode -> (status, error class)
    "http500": ("error", "HTTP500"),
    "http429": ("error", "HTTP429"),
    "close": ("error", "ConnectionClosed"),
    "malformed": ("error", "MalformedEvent"),
    "errorobj": ("error", "StreamError"),
    "nousage": ("error", "MissingUsage"),
    "nodone": ("error", "IncompleteStream"),
    "oversized": ("error", "OversizedEvent"),
    "stall": ("timeout", "IdleTimeout"),
    "slowheaders": ("timeout", "TTFTTimeout"),
    "json200": ("error", "NotEventStream"),
}


@pytest.mark.slow
async def test_every_fault_mode_gives_one_record_with_its_reason(make_server, tmp_path):
    srv = await make_server(token_delay=0.001, slow_s=3.0, oversized_bytes=300_000)
    sessions = [sess(f"fault-{f}-s", [(8, 4, 0), (8, 4, 0)]) for f in FAULTS]
    sessions += [sess("good-1", [(8, 4, 0), (8, 4, 0)]), sess("good-2", [(8, 4, 0)])]
    tm = Timeouts(connect=2, ttft=0.6, idle=0.3, total=10)
    result, records, manifest = await replay(
        trace(*sessions),
        srv.url,
        tmp_path,
        concurrency=len(sessions),
        target_kw={"timeouts": tm, "max_event_bytes": 100_000},
    )
    recs = by_id(records)
    assert (
        len(records) == len(recs) == 2 * len(FAULTS) + 3
    )  # a failed turn does not end its session
    for fault, (status, error_class) in FAULTS.items():
        for turn in (0, 1):
            r = recs[f"fault-{fault}-s:{turn}"]
            assert (r["status"], r["error"]["class"]) == (status, error_class), fault
            assert r["error"]["message"]
    for rid in ("good-1:0", "good-1:1", "good-2:0"):
        assert recs[rid]["status"] == "ok" and recs[rid]["error"] is None
    assert "injected 429" in recs["fault-http429-s:0"]["error"]["message"]
    assert "injected stream error" in recs["fault-errorobj-s:0"]["error"]["message"]
    # the server's numbers are kept when it sent them, even on a failed request
    assert recs["fault-nodone-s:0"]["completion_tokens"] == 4
    assert result.by_status == {"ok": 3, "error": 18, "timeout": 4}
    assert manifest["status"] == "complete"
    assert manifest["counts"]["errors_by_class"] == {c: 2 for _, c in FAULTS.values()}


async def test_unreachable_endpoint_mid_run_is_recorded(make_server, tmp_path):
    srv = await make_server()
    url = srv.url
    await srv.stop()  # nothing listens there any more
    tgt = target(url)
    await tgt.start(check=False)
    try:
        with Recorder(tmp_path) as rec:
            await Replay(trace(sess("a", [(4, 2, 0), (4, 2, 0)])), tgt, ReplayConfig(), rec).run()
    finally:
        await tgt.close()
    assert [(r["status"], r["error"]["class"]) for r in load_records(tmp_path)] == [
        ("error", "ConnectError")
    ] * 2


@pytest.mark.slow
async def test_unreachable_endpoint_at_start_is_a_target_error(make_server, tmp_path):
    srv = await make_server()
    url = srv.url
    await srv.stop()
    with pytest.raises(TargetError, match="cannot reach endpoint"):
        await replay(trace(sess("a", [(4, 2, 0)])), url, tmp_path)
    assert load_manifest(tmp_path)["status"] == "failed"


@pytest.mark.slow
async def test_total_timeout_bounds_a_slow_but_steady_stream(make_server, tmp_path):
    srv = await make_server(token_delay=0.05)
    tm = Timeouts(connect=2, ttft=2, idle=1, total=0.4)
    _, records, _ = await replay(
        trace(sess("slow", [(8, 100, 0)])), srv.url, tmp_path, target_kw={"timeouts": tm}
    )
    (r,) = records
    assert (r["status"], r["error"]["class"]) == ("timeout", "TotalTimeout")
    # the deadline runs from the watchdog's start, before the connect that `t_sent` (the write)
    # follows: at load a slow connect put t_done - t_sent under 0.4 (0.392 once)
    assert r["t_done"] - r["t_scheduled"] >= 0.4
    assert 0 < len(r["chunk_times"]) < 100  # cut 0.4 s into a 5 s stream


@pytest.mark.slow
async def test_ttft_timeout_counts_the_wait_after_headers(make_server, tmp_path):
    srv = await make_server(ttft_base=1.0)  # headers and the role chunk at once, then nothing
    tm = Timeouts(connect=2, ttft=0.3, idle=5, total=10)
    _, records, _ = await replay(
        trace(sess("a", [(8, 4, 0)])), srv.url, tmp_path, target_kw={"timeouts": tm}
    )
    (r,) = records
    assert (r["status"], r["error"]["class"], r["t_first_token"]) == (
        "timeout",
        "TTFTTimeout",
        None,
    )  # ended before the server's first token (at 1 s)
    assert r["t_done"] - r["t_scheduled"] >= 0.3  # from the start, before the connect
