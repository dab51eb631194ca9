"""Sharding one replay's sessions across workers.

A main session and all its subagents (its *family*) go to one worker, so forks, spawns and joins
stay inside one event loop. Assignment is balanced by request count, not hashed: families are
placed largest first on the worker with the least work per slot (greedy LPT), which keeps
closed-loop workers finishing together even when a few families are much longer than the rest.
The plan is a pure function of the trace and the config, so a rerun shards the same way. Within
a shard, main sessions keep their trace order (closed loop starts them in that order); open-loop
and timestamp arrivals are drawn once for the whole run and each shard gets its part of that one
schedule, so the offered load is the single-process run's.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from harness.driver.config import ReplayConfig
from harness.driver.load import arrivals
from harness.trace.model import Session, Trace


@dataclass
class Shard:
    worker: int
    concurrency: int  # closed-loop slots of this worker (its share of the run's concurrency)
    mains: list[str] = field(default_factory=list)  # main session ids, trace order
    requests: int = 0  # planned requests: every turn of every family member
    starts: list[tuple[float, str]] | None = None  # open loop: (intended start, main id), by time


@dataclass
class ShardPlan:
    shards: list[Shard]
    stopped_by: str | None  # "max_sessions" when the trace has more main sessions than allowed


def split(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainder; sums to `total`)."""
    whole = sum(weights) or 1
    exact = [total * w / whole for w in weights]
    parts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: parts[i] - exact[i])
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


def family_requests(trace: Trace, main: Session) -> int:
    return sum(len(s.turns) for s in trace.family(main.id))


def plan_shards(trace: Trace, config: ReplayConfig, workers: int) -> ShardPlan:
    mains = trace.main_sessions
    stopped_by = None
    if config.max_sessions is not None and len(mains) > config.max_sessions:
        mains, stopped_by = mains[: config.max_sessions], "max_sessions"
    n = max(1, min(workers, len(mains)))
    if config.load == "closed":
        n = min(n, config.concurrency)
    if config.max_requests is not None:
        n = min(n, config.max_requests)
    slots = split(config.concurrency, [1] * n) if config.load == "closed" else [1] * n
    shards = [Shard(worker=i, concurrency=slots[i]) for i in range(n)]
    _assign(trace, mains, shards)
    if config.load != "closed":
        _schedule(mains, config, shards)
    return ShardPlan(shards, stopped_by)


def _assign(trace: Trace, mains: list[Session], shards: list[Shard]) -> None:
    order = {s.id: i for i, s in enumerate(mains)}
    sizes = [(family_requests(trace, s), s.id) for s in mains]
    sizes.sort(key=lambda x: (-x[0], order[x[1]]))
    heap = [(0.0, sh.worker) for sh in shards]  # (requests per slot, worker)
    for size, sid in sizes:
        _, w = heapq.heappop(heap)
        shard = shards[w]
        shard.mains.append(sid)
        shard.requests += size
        heapq.heappush(heap, (shard.requests / shard.concurrency, w))
    for shard in shards:
        shard.mains.sort(key=order.__getitem__)


def _schedule(mains: list[Session], config: ReplayConfig, shards: list[Shard]) -> None:
    owner: dict[str, list[tuple[float, str]]] = {}  # main id -> its shard's starts
    for sh in shards:
        sh.starts = []
        for sid in sh.mains:
            owner[sid] = sh.starts
    for t, s in arrivals(mains, config):  # one draw for the whole run, in time order
        owner[s.id].append((t, s.id))


def shard_trace(trace: Trace, shard: Shard) -> Trace:
    """The part of `trace` a worker needs: its families, nothing else (content is keyed by
    session id and the trace seed, so prompts are byte-identical to the whole trace's)."""
    sessions = [m for sid in shard.mains for m in trace.family(sid)]
    return Trace(header=trace.header, sessions=tuple(sessions))


def shard_config(config: ReplayConfig, plan: ShardPlan, shard: Shard) -> ReplayConfig:
    """The worker's config: its slots, and its share of the run's request counts."""
    weights = [sh.requests for sh in plan.shards]
    i = shard.worker
    max_requests = config.max_requests
    if max_requests is not None:
        max_requests = max(1, split(max_requests, weights)[i])
    return config.model_copy(
        update={
            "concurrency": shard.concurrency,
            "max_sessions": None,  # applied once, by the plan
            "max_requests": max_requests,
            "warmup_requests": split(config.warmup_requests, weights)[i],
        }
    )
