"""One replay across Ray workers, recorded into one run folder as if one process had run it.

The coordinator (this process) plans the shards, starts one `ReplayWorker` actor per shard,
gives every worker the same start instant (epoch seconds, turned into each machine's own
perf_counter), and collects records as they finish, appending them to the one `records.jsonl`.
Every time is relative to that shared start, so records from all workers are on one run clock.
A worker that dies or stops answering is *lost*: the requests it had in flight (as of its last
poll) are recorded as failed with error class `WorkerLost`, the others run on, and the manifest
and the result say which worker was lost and why.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.distributed.cluster import (
    check_reachable_from_nodes,
    import_ray,
    ray_cluster,
    worker_cpus,
)
from harness.distributed.health import WorkerHealth, lost_record
from harness.distributed.shard import ShardPlan, plan_shards, shard_config, shard_trace
from harness.distributed.worker import ReplayWorker, local_t0
from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.live.selfcheck import write_worker_checks
from harness.driver.manifest import replay_fields
from harness.driver.replay import ReplayResult
from harness.driver.replay_into import keep_trace
from harness.driver.runfolder import RunFolder
from harness.errors import InputError, TargetError
from harness.schema import RunStatus
from harness.trace.model import Trace

POLL_WAIT_S = 0.2  # a poll returns as soon as records are ready, or after this long
POLL_TIMEOUT_S = 60.0  # a worker that does not answer a poll for this long is lost
READY_TIMEOUT_S = 120.0  # for Ray to place and start every worker
START_LEAD_S = 0.5  # the shared start is this far after the last worker got its shard


@dataclass
class DistributedReplayResult(ReplayResult):
    workers: list[dict] = field(default_factory=list)  # the manifest's per-worker health
    workers_lost: int = 0  # lost or failed workers; status is RunStatus.PARTIAL when > 0


async def run_replay_distributed(
    trace: Trace,
    target_config: HTTPTargetConfig,
    config: ReplayConfig,
    run_dir: str | Path,
    *,
    workers: int,
    address: str = "auto",
    trace_path: str | Path | None = None,
    manifest_extra: dict | None = None,
) -> DistributedReplayResult:
    """`run_replay`, with the sessions sharded over `workers` Ray actors (see module doc)."""
    _check(target_config, workers)
    fields = replay_fields(
        trace,
        config,
        target=HTTPTarget(target_config).describe(),
        endpoints=target_config.endpoints,
        trace_path=trace_path,
    )
    with RunFolder(run_dir, config.run_id, **fields, **(manifest_extra or {})) as folder:
        result = await replay_distributed_into(
            folder, trace, target_config, config, workers=workers, address=address
        )
        folder.close(result.status)
        return result


async def replay_distributed_into(
    folder: RunFolder,
    trace: Trace,
    target_config: HTTPTargetConfig,
    config: ReplayConfig,
    *,
    workers: int,
    address: str = "auto",
) -> DistributedReplayResult:
    """The sharded replay into an open run folder; the caller closes the folder."""
    _check(target_config, workers)
    keep_trace(trace, folder.path)
    plan = plan_shards(trace, config, workers)
    with ray_cluster(address) as ray:
        check_reachable_from_nodes(ray, target_config.endpoints)
        run = _Coordinator(ray, trace, target_config, config, plan, folder)
        folder.update(
            execution={"backend": "ray", "workers": len(plan.shards), "requested": workers},
            workers=[h.as_dict() for h in run.health],
        )
        return await run.run()


def _check(target_config: HTTPTargetConfig, workers: int) -> None:
    if not isinstance(target_config, HTTPTargetConfig):
        raise InputError(
            "the ray backend needs an HTTP target: an in-process engine cannot be shared by "
            "several processes (use engine mode 'http' or endpoints)",
            field="execution.backend",
        )
    if workers < 1:
        raise InputError(f"must be >= 1, got {workers}", field="execution.workers")
    import_ray()


class _Coordinator:
    def __init__(self, ray, trace, target_config, config, plan: ShardPlan, folder: RunFolder):
        self.ray, self.trace, self.config, self.plan = ray, trace, config, plan
        self.target_config, self.folder = target_config, folder
        self.health = [
            WorkerHealth(sh.worker, len(sh.mains), sh.requests, sh.concurrency)
            for sh in plan.shards
        ]
        self.results: dict[int, dict] = {}
        self.clients: dict[int, dict] = {}  # each finished worker's self-check samples
        self.actors: list = []
        self.t0 = time.perf_counter()
        self.start_wall: float | None = None
        self.interrupted = False
        # its interrupt() handles every phase itself (workers starting included)
        self.running = True

    def now(self) -> float:
        return time.perf_counter() - self.t0

    async def run(self) -> DistributedReplayResult:
        try:
            with self.folder.signals(self):
                await self._spawn()
                await self._start()
                await asyncio.gather(
                    *(self._collect(h, a) for h, a in zip(self.health, self.actors, strict=True))
                )
            self._raise_if_nothing_ran()
            return self._result()
        except asyncio.CancelledError:
            self.interrupt()
            raise
        finally:
            for actor in self.actors:
                self.ray.kill(actor)
            self._finish()

    def interrupt(self) -> None:
        """Ctrl-C / SIGTERM: every worker stops sending; in-flight requests end `cancelled`."""
        self.interrupted = True
        for h, actor in zip(self.health, self.actors, strict=False):
            if h.status == "running":
                actor.interrupt.remote()

    def stop(self, reason: str) -> None:
        """A record could not be written (`reason` "disk_full"): every worker stops, as on Ctrl-C."""
        self.stop_reason = reason
        self.interrupt()

    # ---- start ---------------------------------------------------------------------------------

    async def _spawn(self) -> None:
        cpus = worker_cpus(self.ray, len(self.plan.shards))
        remote = self.ray.remote(max_restarts=0, num_cpus=cpus)(ReplayWorker)
        tag = secrets.token_hex(3)  # names stay unique when runs share a cluster and a run id
        self.actors = [
            remote.options(
                name=f"harness:{self.config.run_id}:{tag}:worker-{h.id}",
                scheduling_strategy="SPREAD",
            ).remote(h.id)
            for h in self.health
        ]
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                places = await asyncio.gather(*(a.where.remote() for a in self.actors))
                for h, place in zip(self.health, places, strict=True):
                    h.host, h.pid = place["host"], place["pid"]
                await asyncio.gather(
                    *(
                        self._load(sh, a)
                        for sh, a in zip(self.plan.shards, self.actors, strict=True)
                    )
                )
        except TimeoutError:
            raise TargetError(
                f"Ray did not start {len(self.actors)} workers within {READY_TIMEOUT_S:.0f} s "
                f"(cluster resources: {self.ray.cluster_resources()})"
            ) from None
        except self.ray.exceptions.RayError as exc:  # e.g. the worker could not import harness
            raise TargetError(f"a Ray worker did not start: {_last_line(exc)}") from None

    async def _load(self, shard, actor) -> None:
        config = shard_config(self.config, self.plan, shard)
        await actor.load.remote(shard_trace(self.trace, shard), config, shard.starts)

    async def _start(self) -> None:
        self.start_wall = time.time() + START_LEAD_S
        self.t0 = local_t0(self.start_wall)
        # The target config travels as a small inline argument (never the object store's files).
        await asyncio.gather(
            *(a.start.remote(self.target_config, self.start_wall) for a in self.actors)
        )
        for h in self.health:
            h.status = "running"
        if self.interrupted:  # a signal came while the workers were starting
            self.interrupt()

    # ---- collect -------------------------------------------------------------------------------

    async def _collect(self, h: WorkerHealth, actor) -> None:
        errors = (self.ray.exceptions.RayError, TimeoutError)
        while True:
            try:
                async with asyncio.timeout(POLL_TIMEOUT_S):
                    reply = await actor.poll.remote(POLL_WAIT_S)
            except errors as exc:
                self._lose(h, actor, exc)
                return
            self._take(h, reply)
            if reply["done"]:
                self._finish_worker(h, reply)
                return

    def _take(self, h: WorkerHealth, reply: dict) -> None:
        for rec in reply["started"]:
            h.in_flight[rec["request_id"]] = rec
            if rec["agent"] == "main" and rec["turn"] == 0:
                h.mains_seen.add(rec["session_id"])
        for rec in reply["records"]:
            h.in_flight.pop(rec["request_id"], None)
            if rec["agent"] == "main" and rec["turn"] == 0:
                h.mains_seen.add(rec["session_id"])
            self.folder.write(rec)
        h.requests += len(reply["records"])

    def _finish_worker(self, h: WorkerHealth, reply: dict) -> None:
        if reply.get("client"):
            self.clients[h.id] = reply["client"]
        if reply["error"] is not None:
            h.status, h.error = "failed", reply["error"]
            self._close_in_flight(h)
            return
        self.results[h.id] = reply["result"]
        h.status = "interrupted" if reply["result"]["status"] == "interrupted" else "finished"

    def _lose(self, h: WorkerHealth, actor, exc: BaseException) -> None:
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        h.status, h.error = "lost", f"{type(exc).__name__}: {first_line}".rstrip(": ")
        self.ray.kill(actor)  # a worker that stopped answering must not send any more
        self._close_in_flight(h)

    def _close_in_flight(self, h: WorkerHealth) -> None:
        t = self.now()
        for rec in h.in_flight.values():
            self.folder.write(lost_record(rec, h, t))
        h.lost_requests += len(h.in_flight)
        h.requests += len(h.in_flight)
        h.in_flight.clear()

    # ---- end -----------------------------------------------------------------------------------

    def _raise_if_nothing_ran(self) -> None:
        if self.health and all(h.status == "failed" and h.requests == 0 for h in self.health):
            error = self.health[0].error or ""
            raise TargetError(f"{error.removeprefix('TargetError: ')} (every Ray worker failed)")

    def _result(self) -> DistributedReplayResult:
        c = self.folder.counts()
        lost = sum(h.status in ("lost", "failed") for h in self.health)
        stops = [r["stopped_by"] for r in self.results.values() if r["stopped_by"]]
        status = (
            RunStatus.INTERRUPTED
            if self.interrupted
            else RunStatus.PARTIAL
            if lost
            else RunStatus.COMPLETE
        )
        return DistributedReplayResult(
            status=status,
            duration_s=self.now(),
            sessions_started=sum(self._sessions_started(h) for h in self.health),
            requests=c["requests"],
            by_status=c["by_status"],
            errors_by_class=c["errors_by_class"],
            stopped_by=self._ending(stops),
            workers=[h.as_dict() for h in self.health],
            workers_lost=lost,
        )

    def _ending(self, stops: list[str]) -> str:
        """The manifest's `stopped_by`: a lost worker first, then what stopped the workers."""
        if self.interrupted:
            return getattr(self, "stop_reason", "signal")
        if any(h.status in ("lost", "failed") for h in self.health):
            return "worker_lost"
        return (stops or [self.plan.stopped_by or "trace_end"])[0]

    def _sessions_started(self, h: WorkerHealth) -> int:
        if h.id in self.results:
            return self.results[h.id]["sessions_started"]
        return len(h.mains_seen)  # a lost or failed worker: the ones we heard of

    def _finish(self) -> None:
        if self.clients:  # a lost worker's samples are lost with it
            write_worker_checks(self.folder.path, [self.clients[i] for i in sorted(self.clients)])
        stops = [r["stopped_by"] for r in self.results.values() if r["stopped_by"]]
        self.folder.update(
            t0_wall=self.start_wall,
            t0_perf_counter=self.t0,
            duration_s=self.now(),
            stopped_by=self._ending(stops),
            counts=self.folder.counts(),
            workers=[h.as_dict() for h in self.health],
            workers_lost=sum(h.status in ("lost", "failed") for h in self.health),
        )


def _last_line(exc: BaseException) -> str:
    """A Ray error's cause: the last line of its text (Ray puts the worker's traceback first)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]
