"""The live progress line: shown on a terminal, silent otherwise."""

import asyncio
import os
import pty
import sys

import pytest

from harness.driver import progress
from harness.driver.stats import ReplayStats
from harness.trace.native import write_trace
from tests.driver.helpers import load_records, sess, trace


def test_render_shows_counts_throughput_and_ttft():
    stats = ReplayStats(in_flight=3, active_sessions=2, done=10, failed=1, output_tokens=500)
    stats.recent_ttft.extend([0.1, 0.2, 0.3])
    line = progress.render(stats, 2.0)
    for part in (
        "10 done",
        "1 failed",
        "in flight 3",
        "sessions 2",
        "250 tok/s",
        "TTFT p50 200 ms",
    ):
        assert part in line


def test_quiet_or_not_a_terminal_means_no_display():
    assert progress.wanted(quiet=True) is False
    assert progress.wanted(quiet=False) is sys.stderr.isatty()


@pytest.mark.slow
async def test_display_on_a_terminal(server, tmp_path):
    path = tmp_path / "trace.jsonl"
    write_trace(trace(*[sess(f"s{i}", [(8, 40, 0.2)] * 4) for i in range(2)]), path)
    master, slave = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "harness",
        "replay",
        str(path),
        "--endpoint",
        server.url,
        "--model",
        "m",
        "--concurrency",
        "2",
        "-o",
        str(tmp_path / "run"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    seen = bytearray()
    loop = asyncio.get_running_loop()

    def drain() -> None:
        try:
            seen.extend(os.read(master, 65536))
        except OSError:  # the child closed its end
            loop.remove_reader(master)

    loop.add_reader(master, drain)
    try:
        assert await asyncio.wait_for(proc.wait(), 60) == 0
        await asyncio.sleep(0.1)
    finally:
        loop.remove_reader(master)
        os.close(master)
    assert b"requests 8 done, 0 failed" in bytes(seen)
    assert len(load_records(tmp_path / "run")) == 8
