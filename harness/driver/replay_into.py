"""One replay into a run folder (`RunFolder`: records, manifest, signals), with progress.
`harness replay` and `harness run` call `replay_into`; `run_replay` opens and closes the folder
itself (for library use and tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from pathlib import Path

from harness import collector
from harness.driver import clock
from harness.driver.config import ReplayConfig
from harness.driver.context_limit import ContextLimit
from harness.driver.live import progress, steps
from harness.driver.live.selfcheck import LoopProbe, write_client_check
from harness.driver.live.signals import Signals
from harness.driver.live.stats import ReplayStats
from harness.driver.manifest import replay_fields, started_fields
from harness.driver.replay import Replay, ReplayResult
from harness.driver.runfolder import RunFolder
from harness.driver.target import Target
from harness.schema import TRACE_FILE
from harness.trace.model import Session, Trace
from harness.trace.native import write_trace


def family_width(trace: Trace, s: Session) -> int:
    """Most requests one session family can have in flight at once (subagents run in parallel)."""
    widths = [sum(family_width(trace, trace.session(c)) for c in t.spawns) for t in s.turns]
    return max([1, *widths])


def connection_limit(trace: Trace, config: ReplayConfig) -> int:
    """Connector size: the most requests this load can have in flight (open loop: a generous cap)."""
    if config.load != "closed":
        return 4096
    widest = max((family_width(trace, s) for s in trace.main_sessions), default=1)
    return max(16, config.concurrency * widest)


def keep_trace(trace: Trace, run_dir: Path) -> None:
    """The run folder keeps the trace it replayed: the analyzer computes the ideal cache from it."""
    if not (run_dir / TRACE_FILE).exists():
        write_trace(trace, run_dir / TRACE_FILE)


def event_loop_factory():
    """uvloop's loop when installed (cheaper per event), else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_blocking(coro, *, virtual: bool = False):
    """Run `coro` to completion on uvloop when installed: `harness run` and `harness replay`
    measure on the same event loop. A SIGINT or SIGTERM in any phase of it ends that phase at
    once (`harness.driver.live.signals`); `Interrupted` comes out once the run folder is closed.
    `virtual`: on simulated time (`clock.VirtualLoop`)."""

    async def guarded():
        with Signals().installed():
            return await coro

    factory = clock.VirtualLoop if virtual else event_loop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(guarded())


async def run_replay(
    trace: Trace,
    target: Target,
    config: ReplayConfig,
    run_dir: str | Path,
    *,
    trace_path: str | Path | None = None,
    show_progress: bool = False,
    manifest_extra: dict | None = None,
    stats: ReplayStats | None = None,
) -> ReplayResult:
    """Replay `trace` against `target` into a new run folder (records.jsonl + manifest.json).

    On SIGINT/SIGTERM: in-flight requests are recorded `cancelled`, the manifest says
    "interrupted", and the result's status is "interrupted". `stats`: as `replay_into`'s.
    """
    fields = replay_fields(
        trace, config, target=target.describe(), endpoints=target.endpoints, trace_path=trace_path
    )
    with RunFolder(run_dir, config.run_id, **fields, **(manifest_extra or {})) as folder:
        result = await replay_into(
            folder, trace, target, config, show_progress=show_progress, stats=stats
        )
        folder.close(result.status)
        return result


async def replay_into(
    folder: RunFolder,
    trace: Trace,
    target: Target,
    config: ReplayConfig,
    *,
    show_progress: bool = False,
    stats: ReplayStats | None = None,
) -> ReplayResult:
    """Start `target`, replay into `folder`, close the target; the caller closes the folder.
    `stats`: the live counters to keep (a caller that watches them, e.g. the metrics endpoint)."""
    keep_trace(trace, folder.path)
    # The trace and everything loaded so far live for the whole run: out of the cyclic GC's full
    # collections, which would otherwise stall the event loop for tens of ms.
    gc.collect()
    gen0 = collector.VIRTUAL_GEN0 if clock.is_virtual() else collector.REALTIME_GEN0
    with collector.held_back(gen0):
        return await _replay(folder, trace, target, config, show_progress, stats)


async def _replay(
    folder: RunFolder,
    trace: Trace,
    target: Target,
    config: ReplayConfig,
    show_progress: bool,
    stats: ReplayStats | None,
) -> ReplayResult:
    replay = Replay(trace, target, config, folder.recorder, stats=stats)
    plan = progress.Plan.of(config, trace)
    shown = None
    # On simulated time the loop is never late and CPU seconds have no run-clock meaning: no probe.
    virtual = clock.is_virtual()
    probe = None if virtual else LoopProbe()
    wall0 = time.perf_counter()
    try:
        with folder.signals(replay):
            shape = getattr(target, "probe_like", None)  # a preflight that sends the run's shape
            if shape is not None:
                shape(replay.passes.first_tools())
            name, done = steps.starting(target.describe().get("kind"))
            # a log hears of it after a second: a preflight that fails at once is its one line
            with steps.step(name, show=show_progress, done=done, after_s=1.0):
                await target.start()
            if show_progress:
                stopped = lambda: replay.sending_stopped  # noqa: E731
                shown = asyncio.create_task(progress.show(replay.stats, plan, stopped))
            folder.update(**started_fields(target.describe(), folder.manifest))
            if isinstance(target, ContextLimit):  # the limits the target learned as it started
                folder.update(context_limit=target.manifest())
            if probe is not None:
                probe.start()
            result = await replay.run()
        folder.check_written()
        return result
    finally:
        if shown is not None:
            shown.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await shown
        if probe is not None:
            probe.stop()
        await target.close()
        if probe is not None:
            with contextlib.suppress(OSError):  # a full disk: the records matter, not the samples
                write_client_check(folder.path, probe, replay.t0)
        wall_s = time.perf_counter() - wall0
        folder.update(**_clock_fields(virtual, wall_s, replay.now()))
        folder.update(
            t0_perf_counter=replay.t0,
            duration_s=replay.now(),
            stopped_by=replay.ending,
            unsent_requests=replay.unsent,
            counts=folder.counts(),
        )
        if config.think_cap_s is not None:
            folder.update(
                think_capped={
                    "cap_s": config.think_cap_s,
                    "pauses": replay.think_capped["pauses"],
                    "seconds_cut": round(replay.think_capped["seconds_cut"], 3),
                }
            )


def _clock_fields(virtual: bool, wall_s: float, duration_s: float) -> dict:
    """The manifest's clock: on simulated time, its speed against the wall too."""
    if not virtual:
        return {"t0_wall": time.time() - duration_s}
    return {
        "clock": "virtual",
        "t0_wall": time.time() - wall_s,
        "wall_duration_s": round(wall_s, 3),
        "speedup": round(duration_s / wall_s, 1) if wall_s > 0 else None,
    }
