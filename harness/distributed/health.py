"""Per-worker health, as the manifest reports it, and the records of requests a lost worker
had in flight."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

WORKER_LOST = "WorkerLost"


@dataclass
class WorkerHealth:
    id: int
    sessions: int  # main sessions assigned (subagents travel with them)
    planned_requests: int
    concurrency: int
    requests: int = 0  # records received from this worker (lost in-flight ones included)
    lost_requests: int = 0  # in flight when the worker was lost, recorded as WorkerLost
    status: str = "pending"  # pending | running | finished | interrupted | failed | lost
    error: str | None = None
    host: str | None = None
    pid: int | None = None
    in_flight: dict[str, dict] = field(default_factory=dict, repr=False)  # request id -> record
    mains_seen: set[str] = field(default_factory=set, repr=False)  # main sessions it started

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.repr}


def lost_record(rec: dict, worker: WorkerHealth, t_now: float) -> dict:
    """`rec` (as it was when sent) closed as failed: the process that held it is gone."""
    return {
        **rec,
        "chunk_times": [],
        "chunk_tokens": [],
        "t_first_token": None,
        "t_last_token": None,
        "t_done": round(t_now, 6),
        "status": "error",
        "error": {
            "class": WORKER_LOST,
            "message": f"worker {worker.id} was lost while the request was in flight: "
            f"{worker.error}",
        },
    }
