"""One Ray worker: the ordinary async driver (`Replay`) on one shard, records kept for the
coordinator to collect.

This class is plain Python; the coordinator wraps it with `ray.remote`, so importing this module
needs no Ray. Its methods run on the actor's own event loop: `start` returns at once and the
replay runs as a task; `poll` long-polls (returns as soon as there are records, or after
`wait_s`) with the records finished since the last poll and the requests sent since then, so
the coordinator knows what is in flight should this process die. A reply gathers what happens
within `BATCH_S` of the first news, which bounds the poll rate under load (to ~1/BATCH_S) and
keeps a send unannounced for about that long at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time

from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.live.selfcheck import LoopProbe
from harness.driver.recorder import OutcomeCounts
from harness.driver.replay import Replay, ReplayResult
from harness.driver.target import RequestSpec, Sink
from harness.trace.model import Trace


class BufferRecorder(OutcomeCounts):
    """The driver's Recorder interface, holding records in memory until polled."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[dict] = []
        self.news = asyncio.Event()  # a record, a request sent, or the end: worth a poll reply

    def write(self, rec: dict) -> None:
        self.pending.append(rec)
        self.observe(rec)
        self.news.set()

    def drain(self) -> list[dict]:
        out, self.pending = self.pending, []
        self.news.clear()
        return out

    def close(self) -> None:
        pass


def local_t0(start_wall: float) -> float:
    """The perf_counter instant of the wall-clock instant `start_wall` on this machine."""
    return time.perf_counter() + (start_wall - time.time())


BATCH_S = 0.02


class _Announcing:
    """The target, telling the worker each time a request is sent (so a poll can report it)."""

    def __init__(self, target: HTTPTarget, news: asyncio.Event) -> None:
        self.target, self.news = target, news
        self.name, self.endpoints = target.name, target.endpoints

    async def start(self) -> None:
        await self.target.start()

    async def close(self) -> None:
        await self.target.close()

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        # Replay encodes the body before it stamps t_sent, if the target can (see Target).
        return self.target.encode(req)

    async def stream(self, req: RequestSpec, sink: Sink) -> None:
        self.news.set()
        await self.target.stream(req, sink)

    def describe(self) -> dict:
        return self.target.describe()


class ReplayWorker:
    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id
        self.replay: Replay | None = None
        self.recorder = BufferRecorder()
        self.task: asyncio.Task | None = None
        self.result: ReplayResult | None = None
        self.error: str | None = None
        self.announced: set[str] = set()
        self.probe = LoopProbe()  # this process's own self-check (harness.driver.live.selfcheck)
        self.t0: float | None = None

    def where(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid()}

    async def load(
        self, trace: Trace, config: ReplayConfig, starts: list[tuple[float, str]] | None
    ) -> int:
        schedule = None if starts is None else [(t, trace.session(sid)) for t, sid in starts]
        self.trace, self.config, self.schedule = trace, config, schedule
        return len(trace.sessions)

    async def start(self, target_config: HTTPTargetConfig, start_wall: float) -> None:
        """Run the shard from `start_wall` (epoch seconds, shared by every worker). The target
        config may hold an API key: it lives in this process's memory only."""
        target = HTTPTarget(target_config)
        announcing = _Announcing(target, self.recorder.news)
        self.replay = Replay(
            self.trace,
            announcing,
            self.config,
            # Replay only writes records and reads counts(), which BufferRecorder has too;
            # its parameter names the file-writing Recorder class, not that interface.
            self.recorder,  # type: ignore[arg-type]
            schedule=self.schedule,
        )
        self.task = asyncio.create_task(self._run(self.replay, target, local_t0(start_wall)))

    async def _run(self, replay: Replay, target: HTTPTarget, t0: float) -> None:
        self.t0 = t0
        try:
            await target.start()
            self.probe.start()
            self.result = await replay.run(t0=t0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported to the coordinator as this worker's failure
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.probe.stop()
            with contextlib.suppress(Exception):
                await target.close()
            self.recorder.news.set()

    async def poll(self, wait_s: float) -> dict:
        if not self._done():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self.recorder.news.wait()
            if not self._done():
                await asyncio.sleep(BATCH_S)
        done = self._done()
        records = self.recorder.drain()
        return {
            "records": records,
            "started": self._started(records),
            "done": done,
            "result": self._result() if done else None,
            "error": self.error,
            "client": self._client() if done else None,
        }

    def _client(self) -> dict | None:
        """The self-check samples on the shared run clock (t0 is this machine's view of the start)."""
        return (
            None
            if self.t0 is None
            else {"worker": self.worker_id, **self.where(), **self.probe.as_dict(self.t0)}
        )

    def _done(self) -> bool:
        return self.task is not None and self.task.done()

    def _started(self, finished: list[dict]) -> list[dict]:
        """Requests sent since the last poll and still in flight (copies, without chunks)."""
        for rec in finished:
            self.announced.discard(rec["request_id"])
        if self.replay is None:
            return []
        fresh = [rid for rid in self.replay.in_flight if rid not in self.announced]
        self.announced.update(fresh)
        return [
            {**self.replay.in_flight[rid], "chunk_times": [], "chunk_tokens": []} for rid in fresh
        ]

    def _result(self) -> dict | None:
        r = self.result
        if r is None:
            return None
        return {
            "status": r.status,
            "sessions_started": r.sessions_started,
            "stopped_by": r.stopped_by,
        }

    def interrupt(self) -> None:
        if self.replay is not None:
            self.replay.interrupt()
