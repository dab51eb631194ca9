"""One replay run into a run folder: records, manifest, signals, progress. Called by
`harness replay` and `harness run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from pathlib import Path

from harness.driver import progress
from harness.driver.config import ReplayConfig
from harness.driver.manifest import (
    file_sha256,
    finish_manifest,
    new_manifest,
    redact_url,
    write_manifest,
)
from harness.driver.recorder import Recorder
from harness.driver.replay import Replay, ReplayResult
from harness.driver.target import Target
from harness.errors import RunFolderError
from harness.schema import RECORDS_FILE, TRACE_FILE
from harness.trace.model import Session, Trace


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
        from harness.trace.native import write_trace

        run_dir.mkdir(parents=True, exist_ok=True)
        write_trace(trace, run_dir / TRACE_FILE)


def _install_signals(replay: Replay) -> list[int]:
    """First Ctrl-C / SIGTERM: stop cleanly. A second one: give up on the clean-up at once."""
    loop = asyncio.get_running_loop()
    installed = []

    def on_signal() -> None:
        if getattr(replay, "interrupted", False):
            raise KeyboardInterrupt
        replay.interrupt()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / platform
            pass
    return installed


def event_loop_factory():
    """uvloop's loop when installed (cheaper per event), else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def replay_blocking(*args, **kwargs) -> ReplayResult:
    """`run_replay` from synchronous code, on uvloop when available."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(run_replay(*args, **kwargs))


async def run_replay(
    trace: Trace,
    target: Target,
    config: ReplayConfig,
    run_dir: str | Path,
    *,
    trace_path: str | Path | None = None,
    show_progress: bool = False,
    manifest_extra: dict | None = None,
) -> ReplayResult:
    """Replay `trace` against `target` into `run_dir` (records.jsonl + manifest.json).

    Starts and closes the target. On SIGINT/SIGTERM: in-flight requests are recorded
    `cancelled`, the manifest says "interrupted", and the result's status is "interrupted".
    """
    run_dir = Path(run_dir)
    if (run_dir / RECORDS_FILE).exists():
        raise RunFolderError(
            "already holds records; choose a new run folder", path=run_dir / RECORDS_FILE
        )
    recorder = Recorder(run_dir)
    keep_trace(trace, run_dir)
    manifest = new_manifest(
        config.run_id,
        seed=trace.header.seed,
        target=target.describe(),
        endpoints=[redact_url(e) for e in target.endpoints],
        block_size=config.block_size,
        trace_sha256=file_sha256(trace_path) if trace_path else None,
        replay=config.as_dict(),
        **(manifest_extra or {}),
    )
    write_manifest(run_dir, manifest)
    replay = Replay(trace, target, config, recorder)
    # The trace and everything loaded so far live for the whole run: keep them out of the
    # cyclic GC's full collections, which would otherwise stall the event loop for tens of ms.
    gc.collect()
    gc.freeze()
    installed = _install_signals(replay)
    shown = asyncio.create_task(progress.show(replay.stats)) if show_progress else None
    status = "failed"
    try:
        await target.start()
        result = await replay.run()
        status = result.status
        return result
    except asyncio.CancelledError:
        status = "interrupted"
        raise
    finally:
        if shown is not None:
            shown.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await shown
        loop = asyncio.get_running_loop()
        for sig in installed:
            loop.remove_signal_handler(sig)
        await target.close()
        recorder.close()
        t0_wall = time.time() - (time.perf_counter() - replay.t0)
        finish_manifest(
            manifest,
            status,
            t0_wall=t0_wall,
            t0_perf_counter=replay.t0,
            duration_s=replay.now(),
            stopped_by=replay.stopped_by,
            counts=recorder.counts(),
        )
        write_manifest(run_dir, manifest)
        gc.unfreeze()
