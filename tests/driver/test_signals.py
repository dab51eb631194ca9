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


async def _start(*args):
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "harness", *map(str, args),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _until(check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


async def _signal_and_wait(proc, sig) -> tuple[float, str]:
    """Send `sig`; (seconds until the process ended, its stderr)."""
    t0 = time.monotonic()
    proc.send_signal(sig)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    return time.monotonic() - t0, err.decode()


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
    proc = await _start(
        "replay", path, "--endpoint", f"{silent.url}/v1", "--model", "m", "-o", run, "--quiet",
        *flags,
    )  # fmt: skip
    await _until(lambda: silent.connections > 0)  # the /models (or /metrics) request hangs
    await asyncio.sleep(0.2)
    took, err = await _signal_and_wait(proc, sig)
    print(f"{sig.name} -> exit in {took:.3f} s")
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [f"harness: interrupted: {sig.name}"], err
    assert took < 5  # the probe's own timeout is 30 s (connect) to 600 s (TTFT): not waited for
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
    await _until(lambda: len(srv.log) > 2)  # the probe, then the run's requests
    took, err = await _signal_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 130, err
    m = load_manifest(run)
    assert (m["status"], m["signal"], m["stopped_in"]) == ("interrupted", "SIGTERM", "warmup")
    recs = load_records(run)
    assert {r["phase"] for r in recs} == {"warmup"}
    assert [r["status"] for r in recs].count("cancelled") == 2  # one per session in flight
    assert m["counts"]["requests"] == len(recs)


@pytest.mark.slow
async def test_a_signal_while_draining_cancels_the_drain(make_server, tmp_path):
    srv = await make_server(token_delay=0.05)  # 200 tokens: 10 s per request
    path = _trace(tmp_path, [sess(f"s{i}", [(8, 200, 0)] * 3) for i in range(2)])
    run = tmp_path / "run"
    proc = await _start(
        "replay", path, "--endpoint", srv.url, "--model", "m", "-o", run, "--quiet",
        "--concurrency", "2", "--max-duration", "0.3", "--drain", "120", "--timeout-total", "120",
    )  # fmt: skip
    await _until(lambda: len(srv.log) >= 3)
    await asyncio.sleep(0.8)  # past max_duration: the two in flight drain for up to 120 s
    took, err = await _signal_and_wait(proc, signal.SIGINT)
    assert proc.returncode == 130 and took < 5, (took, err)
    m = load_manifest(run)
    assert (m["status"], m["signal"], m["stopped_in"]) == ("interrupted", "SIGINT", "drain")
    assert [r["status"] for r in load_records(run)] == ["cancelled", "cancelled"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_outside_the_loop_either_signal_is_an_interrupt_naming_it(sig):
    """Building the trace and the analysis run outside the event loop: SIGTERM stops them as
    Ctrl-C does, and the handlers before are back afterwards."""
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted, match=sig.name), interrupt_on_signals():
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the signal's handler raises here
    assert signal.getsignal(signal.SIGTERM) is before
