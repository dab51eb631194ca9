"""One SIGINT or SIGTERM ends whatever phase the run is in at once: exit 130, the manifest
`interrupted`, naming the signal (`signal`) and the phase (`stopped_in`)."""

import asyncio
import os
import signal
import sys
import time

import pytest

from harness.driver.live.signals import Interrupted, interrupt_on_signals
from harness.trace.native import write_trace
from tests.driver.helpers import load_manifest, load_records, sess, trace
from tests.driver.sse_server import SilentServer
from tests.waits import HANG_S  # far below the hour these tests give every deadline


async def _start(*args):
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "harness", *map(str, args),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _until(check, proc):
    """Until `check()` holds; the run must still be going (pytest's timeout bounds a hang)."""
    while not check():
        assert proc.returncode is None, "the run ended before the moment waited for"
        await asyncio.sleep(0.02)


async def _signal_and_wait(proc, sig) -> str:
    """Send `sig`; the process's stderr once it ended (killed after `HANG_S`: it hung)."""
    proc.send_signal(sig)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    except TimeoutError:
        proc.kill()
        raise AssertionError(f"{sig.name}: the run did not end (it waits out a deadline)") from None
    return err.decode()


def _trace(tmp_path, sessions):
    path = tmp_path / "trace.jsonl"
    write_trace(trace(*sessions), path)
    return path


@pytest.fixture
async def silent():
    s = SilentServer()
    await s.start()
    yield s
    await s.stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("scrape", [False, True], ids=["preflight", "metrics-scrape"])
@pytest.mark.slow
async def test_one_signal_during_a_stalled_preflight_exits_130_at_once(
    silent, tmp_path, sig, scrape
):
    path = _trace(tmp_path, [sess("a", [(8, 3, 0)])])
    run = tmp_path / "run"
    flags = [] if scrape else ["--no-scrape-metrics"]
    # Every deadline an hour: a run that waited one out instead of stopping would hang.
    hour = [x for d in ("connect", "ttft", "idle", "total") for x in (f"--timeout-{d}", "3600")]
    proc = await _start(
        "replay", path, "--endpoint", f"{silent.url}/v1", "--model", "m", "-o", run, "--quiet",
        *flags, *hour,
    )  # fmt: skip
    await _until(lambda: silent.connections > 0, proc)  # the /models (or /metrics) request hangs
    await asyncio.sleep(0.2)
    err = await _signal_and_wait(proc, sig)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [f"harness: interrupted: {sig.name}"], err
    assert silent.connections == 1  # stopped where it waited: it went on to no other request
    m = load_manifest(run)
    assert (m["status"], m["stopped_by"], m["signal"], m["stopped_in"]) == (
        "interrupted",
        "signal",
        sig.name,
        "preflight",
    )
    assert load_records(run) == []


@pytest.mark.slow
async def test_a_signal_in_the_warmup_window_names_the_warmup(make_server, tmp_path):
    srv = await make_server(token_delay=0.02)
    path = _trace(tmp_path, [sess(f"s{i}", [(8, 40, 0)] * 20) for i in range(2)])
    run = tmp_path / "run"
    proc = await _start(
        "replay", path, "--endpoint", srv.url, "--model", "m", "-o", run, "--quiet",
        "--concurrency", "2", "--warmup", "600",
    )  # fmt: skip
    await _until(lambda: len(srv.log) > 2, proc)  # the probe, then the run's requests
    err = await _signal_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 130, err
    m = load_manifest(run)
    assert (m["status"], m["signal"], m["stopped_in"]) == ("interrupted", "SIGTERM", "warmup")
    recs = load_records(run)
    assert {r["phase"] for r in recs} == {"warmup"}
    assert [r["status"] for r in recs].count("cancelled") == 2  # one per session in flight
    assert m["counts"]["requests"] == len(recs)


@pytest.mark.slow
async def test_a_signal_while_draining_cancels_the_drain(make_server, tmp_path):
    srv = await make_server(token_delay=1.0)  # 200 tokens: 200 s per request
    path = _trace(tmp_path, [sess(f"s{i}", [(8, 200, 0)] * 3) for i in range(2)])
    run = tmp_path / "run"
    proc = await _start(
        "replay", path, "--endpoint", srv.url, "--model", "m", "-o", run, "--quiet",
        "--concurrency", "2", "--max-duration", "0.3", "--drain", "3600", "--timeout-total",
        "3600",
    )  # fmt: skip
    await _until(lambda: len(srv.log) >= 3, proc)
    await asyncio.sleep(0.8)  # past max_duration: the two in flight drain for up to an hour
    err = await _signal_and_wait(proc, signal.SIGINT)  # a run that drained would hang here
    assert proc.returncode == 130, err
    m = load_manifest(run)
    assert (m["status"], m["signal"], m["stopped_in"]) == ("interrupted", "SIGINT", "drain")
    recs = load_records(run)
    assert [r["status"] for r in recs] == ["cancelled", "cancelled"]
    assert all(len(r["chunk_times"]) < 200 for r in recs)  # cut mid-stream


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_outside_the_loop_either_signal_is_an_interrupt_naming_it(sig):
    """Building the trace and the analysis run outside the event loop: SIGTERM stops them as
    Ctrl-C does, and the handlers before are back afterwards."""
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted, match=sig.name), interrupt_on_signals():
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the signal's handler raises here
    assert signal.getsignal(signal.SIGTERM) is before
