"""The adversarial battery as tests: a whole `harness replay` against a server that misbehaves
one way on every request; its exit code, each record's status and reason, and counts equal to
what the server saw (docs/driver.md, "Inputs and exit codes")."""

import pytest

from tests.driver.helpers import load_manifest, load_records, sess
from tests.driver.test_endings import KEY, _harness, _trace

BATTERY = {
    # mode -> (exit code, status, error class)
    "stall": (1, "timeout", "IdleTimeout"),  # stops after the first token
    "malformed": (1, "error", "MalformedEvent"),  # a garbled event
    "nodone": (1, "error", "IncompleteStream"),
    "json200": (1, "error", "NotEventStream"),
    "emptydeltas": (0, "ok", None),  # usage and [DONE]: ok
    "close": (1, "error", "ConnectionClosed"),  # the connection dropped mid-stream
    "http500": (1, "error", "HTTP500"),
    "http404": (1, "error", "HTTP404"),
    "echoauth": (1, "error", "HTTP401"),  # a 401 quoting the key it was sent
}


@pytest.mark.parametrize("mode", BATTERY)
@pytest.mark.slow
async def test_a_server_failing_one_way_on_every_request(make_server, tmp_path, mode):
    code, status, error_class = BATTERY[mode]
    srv = await make_server(token_delay=0.001, slow_s=2.0)
    path = _trace(tmp_path, [sess(f"fault-{mode}-{i}", [(8, 4, 0)] * 2) for i in range(3)])
    run = tmp_path / "run"
    got, out, err = await _harness(
        "replay", path, "--endpoint", srv.url, "--model", "m", "-o", run, "--quiet",
        "--concurrency", "3", "--timeout-idle", "0.3", "--timeout-ttft", "5",
        "--api-key-env", "BATTERY_KEY", env={"BATTERY_KEY": KEY},
    )  # fmt: skip
    assert got == code, err
    if code == 1:
        assert "no measured request succeeded (6 of 6 failed)" in err, err
    recs = load_records(run)
    served = [e for e in srv.log if e["session_id"] != "preflight"]
    assert sorted(r["request_id"] for r in recs) == sorted(e["request_id"] for e in served)
    assert len(recs) == 6 and len(srv.log) == 7  # the probe, then every request once
    assert {(r["status"], (r["error"] or {}).get("class")) for r in recs} == {(status, error_class)}
    counts = load_manifest(run)["counts"]
    assert counts["requests"] == 6 and counts["by_status"] == {status: 6}
    if mode == "emptydeltas":  # the server's own count is kept; each event is a token
        assert {(r["completion_tokens"], sum(r["chunk_tokens"])) for r in recs} == {(4, 4)}
    for f in run.rglob("*"):
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f
    assert KEY not in out + err
