"""Progress: a bar on a terminal, a plain line every ~10 s otherwise, each with phase and ETA."""

import asyncio
import os
import pty
import re
import sys

import pytest

from harness.driver.live import progress, steps
from harness.driver.live.stats import ReplayStats
from harness.trace.native import write_trace
from tests.driver.helpers import load_records, sess, trace
from tests.waits import HANG_S


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


def test_quiet_means_no_display():
    assert progress.wanted(quiet=True) is False
    assert progress.wanted(quiet=False) is True


def test_a_timed_run_shows_its_phase_share_and_eta():
    plan = progress.Plan(duration_s=90.0, warmup_s=10.0, cooldown_s=10.0, drain_s=60)
    stats = ReplayStats(done=40)
    assert progress.render(stats, 5.0, plan).startswith("warm-up: 5 s of 1:30 (6%), ETA 1:25")
    assert progress.render(stats, 45.0, plan).startswith("measuring: 45 s of 1:30 (50%), ETA 45 s")
    assert progress.render(stats, 85.0, plan).startswith("cool-down: 1:25 of 1:30 (94%), ETA 5 s")
    draining = progress.render(ReplayStats(done=40, in_flight=3), 95.0, plan, sending_stopped=True)
    assert draining.startswith("draining: waiting for 3 requests in flight, at most 55 s more |")
    drained = progress.render(stats, 97.0, plan, sending_stopped=True)
    assert drained.startswith("draining: nothing left in flight |")


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_bars_counters_fit_the_terminal_dropping_whole_fields(width):
    """At 80 columns the counters used to be cut mid-word ('in fl'): now the lowest-priority
    fields go whole, failures before the rate, and nothing runs past the room left."""
    stats = ReplayStats(in_flight=5, done=1271, failed=3, output_tokens=9040)
    stats.recent_ttft.extend([0.069])
    plan = progress.Plan(duration_s=90.0)
    middle = progress.where(plan, 80.0, stats, False)
    room = width - progress.PHASE_W - progress._bar_width(width) - len(middle) - 4
    counts = progress.brief(stats, 80.0, room)
    assert len(counts) <= room
    fields = ["1,271 done", "3 failed", "5 in flight", "113 tok/s", "TTFT 69 ms"]
    shown = counts.split(", ")
    assert shown == fields[: len(shown)], counts  # a prefix: whole fields, in priority order
    assert "failed" in counts  # failures outrank the rate, the in-flight count and TTFT
    assert progress.brief(stats, 80.0, 200) == ", ".join(fields)


def test_the_bar_is_drawn_in_a_neutral_colour_not_an_errors_red():
    from rich.progress import BarColumn

    bar = next(c for c in progress._columns(80) if isinstance(c, BarColumn))
    assert {bar.complete_style, bar.finished_style} == {"cyan"}


def test_a_phase_before_the_replay_has_its_own_line_from_its_first_second(capsys, monkeypatch):
    """The engine's start: a line as it begins (a log shows it at once) and how long it took."""
    monkeypatch.setattr(steps, "is_terminal", lambda: False)
    name, done = steps.starting("engine-inprocess")
    with steps.step(name, done=done):
        assert capsys.readouterr().err == "progress: starting the reference engine…\n"
    assert capsys.readouterr().err.startswith("progress: starting the reference engine done (")
    with steps.step(name, done=done, after_s=60):  # one that ends at once says nothing
        pass
    assert capsys.readouterr().err == ""


def test_a_run_bounded_by_requests_takes_its_eta_from_the_rate_so_far():
    plan = progress.Plan(requests=400)
    line = progress.render(ReplayStats(done=100), 20.0, plan)
    assert line.startswith("measuring: 100 of 400 requests, 20 s (25%), ETA 1:00")
    assert progress.eta_s(plan, 20.0, ReplayStats(done=0)) is None  # no rate yet: no guess


def test_an_open_ended_run_shows_elapsed_time_and_no_eta():
    line = progress.render(ReplayStats(done=3), 12.0, progress.Plan())
    assert line.startswith("measuring: 12 s |")


def test_the_plan_of_a_cycled_closed_loop_is_its_time_limit():
    from harness.driver.config import ReplayConfig

    t = trace(*[sess(f"s{i}", [(8, 4, 0)] * 3) for i in range(2)])
    cycled = progress.Plan.of(ReplayConfig(load="closed", concurrency=1, max_duration_s=30), t)
    assert (cycled.duration_s, cycled.requests) == (30, None)
    once = progress.Plan.of(ReplayConfig(load="closed", concurrency=1), t)
    assert (once.duration_s, once.requests) == (None, 6)


@pytest.mark.slow
async def test_plain_lines_when_stderr_is_not_a_terminal(server, tmp_path, monkeypatch):
    """A `2>&1 | tee` log: a line every PLAIN_EVERY_S with the plan and the ETA, and one at the end."""
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.5)
    path = tmp_path / "trace.jsonl"
    write_trace(trace(*[sess(f"s{i}", [(8, 40, 0.2)] * 40) for i in range(2)]), path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import sys; from harness.driver.live import progress; progress.PLAIN_EVERY_S = 0.5;"
        "from harness.app.cli import main; sys.exit(main(sys.argv[1:]))",
        "replay", str(path), "--endpoint", server.url, "--model", "m", "--concurrency", "2",
        "--max-duration", "2", "-o", str(tmp_path / "run"),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    lines = [x for x in err.decode().splitlines() if x.startswith("progress: ")]
    assert proc.returncode == 0, err
    assert len(lines) >= 3, err  # a preflight that took under a second: no line of its own
    assert lines[0].startswith("progress: measuring: 0 s of 2 s (0%), ETA 2 s")  # at once
    assert "of 2 s" in lines[1] and "ETA" in lines[1] and "measuring" in lines[1]
    assert lines[-1].startswith("progress: draining")


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
        assert await asyncio.wait_for(proc.wait(), HANG_S) == 0
        await asyncio.sleep(0.1)
    finally:
        loop.remove_reader(master)
        os.close(master)
    shown = re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b"", bytes(seen))
    assert b"8 of 8 requests" in shown and b"8 done" in shown and b"ETA" in shown
    assert b"measuring" in shown and "━".encode() in shown  # the phase and the bar
    assert len(load_records(tmp_path / "run")) == 8
