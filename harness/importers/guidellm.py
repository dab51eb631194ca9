"""GuideLLM's JSON report (`--output json`, `benchmarks.json`): per benchmark, every request under
`requests.successful / errored / incomplete`, with wall-clock times (s) in `info.timings`.

The report keeps each request's first and last token times but not the chunks in between, so
TTFT, TPOT and E2EL import exactly and the token-weighted ITL is not available.

Sessions: `info.conversation_id` names a conversation graph, `info.node_id` a request in it,
`info.agent_id` the agent that owns it (null or "default": the main chain, anything else a
subagent) and `info.parent_node_ids` its direct predecessors. A subagent's requests become their
own session `<conversation>.<agent>` (agent `sub`), whose parent is the session owning the first
of its requests' predecessors outside it; a session's turns are its requests in GuideLLM's
topological order (`info.preceding_nodes`), since `info.turn_index` is a path depth that
subagents share with their parent.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import InputError
from harness.importers.common import NO_TRACE, Imported, need, record, wall_iso
from harness.schema import Record

STATUS = {"successful": "ok", "errored": "error", "incomplete": "cancelled"}
NOTES = [
    "GuideLLM's time_per_output_token is (last token - request start) / output tokens: it includes TTFT; "
    "its inter_token_latency is our TPOT",
    "chunk arrival times are not in the report: ITL (token-weighted) is not available here; TPOT is",
    "prompt, completion and cached tokens are GuideLLM's per-request counts (the server's usage when it reported one)",
    "percentiles: GuideLLM reports the observed value at rank ceil(q*n) (numpy's inverted_cdf); ours "
    "interpolate linearly between neighbours (docs/metrics.md), so p50/p95 differ on the same requests "
    "while means agree",
    NO_TRACE,
]
MAIN_AGENTS = (None, "default")  # GuideLLM's main chain


def read(path: Path, benchmark: int | None = None) -> Imported:
    path = path / "benchmarks.json" if path.is_dir() else path
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read ({exc})", path=path) from exc
    benchmarks = need(report, "benchmarks", path, "a GuideLLM JSON report")
    if benchmark is None and len(benchmarks) != 1:
        raise InputError(
            f"holds {len(benchmarks)} benchmarks (a sweep); pick one with --benchmark N",
            path=path,
            field="benchmarks",
        )
    chosen = benchmarks[benchmark or 0]
    requests = need(chosen, "requests", path, "benchmarks[]")
    rows = [(STATUS[kind], r) for kind in STATUS for r in (requests.get(kind) or [])]
    starts = [_timings(r).get("request_start") or r.get("request_start_time") for _, r in rows]
    t0 = min((s for s in starts if s is not None), default=0.0)
    places = _places([r for _, r in rows])
    records = [_record(status, r, t0, i, places[i]) for i, (status, r) in enumerate(rows)]
    records.sort(key=lambda rec: rec["t_sent"] if rec["t_sent"] is not None else float("inf"))
    settings = {
        "profile": (chosen.get("config") or {}).get("strategy"),
        "benchmark": benchmark or 0,
    }
    return Imported("guidellm", path, records, list(NOTES), started_at=wall_iso(t0), meta=settings)


def _timings(r: dict) -> dict:
    return (r.get("info") or {}).get("timings") or {}


def _session(r: dict, i: int) -> str:
    info = r.get("info") or {}
    conv = str(info.get("conversation_id") or r.get("request_id") or f"guidellm-{i}")
    agent = info.get("agent_id")
    return conv if agent in MAIN_AGENTS else f"{conv}.{agent}"


def _places(rows: list[dict]) -> list[tuple[str, str | None, int]]:
    """(session, parent session, turn) of every request."""
    sessions = [_session(r, i) for i, r in enumerate(rows)]
    infos = [r.get("info") or {} for r in rows]
    keys = [(f.get("conversation_id"), f.get("node_id")) for f in infos]
    owner = dict(zip(keys, sessions, strict=True))
    turns: dict[str, int] = {}
    parents: dict[str, str | None] = {}
    place: list[tuple[str, str | None, int]] = [("", None, 0)] * len(rows)
    for i in sorted(range(len(rows)), key=lambda i: (infos[i].get("preceding_nodes") or 0, i)):
        sid = sessions[i]
        if sid not in parents:
            parents[sid] = _parent(infos[i], sid, owner)
        place[i] = (sid, parents[sid], turns.get(sid, 0))
        turns[sid] = turns.get(sid, 0) + 1
    return place


def _parent(info: dict, sid: str, owner: dict) -> str | None:
    """A subagent's parent: the session of its first request's first predecessor outside it."""
    if info.get("agent_id") in MAIN_AGENTS:
        return None
    conv = info.get("conversation_id")
    ups = (owner.get((conv, p)) for p in info.get("parent_node_ids") or [])
    return next((u for u in ups if u and u != sid), str(conv) if conv is not None else None)


def _record(status: str, r: dict, t0: float, i: int, place: tuple) -> Record:
    t = _timings(r)
    clock = lambda s: None if s is None else s - t0  # noqa: E731
    info = r.get("info") or {}
    error = info.get("error")
    session, parent, turn = place
    return record(
        request_id=r.get("request_id") or f"guidellm-{i}",
        session_id=session,
        parent_session_id=parent,
        agent="main" if info.get("agent_id") in MAIN_AGENTS else "sub",
        turn=turn,
        t_scheduled=clock(t.get("targeted_start")),
        t_sent=clock(t.get("request_start") or r.get("request_start_time")),
        t_first_token=clock(t.get("first_token_iteration")) if status == "ok" else None,
        t_last_token=clock(t.get("last_token_iteration")) if status == "ok" else None,
        t_done=clock(t.get("request_end") or r.get("request_end_time")),
        prompt_tokens=r.get("prompt_tokens"),
        completion_tokens=r.get("output_tokens"),
        cached_tokens=r.get("cached_tokens"),
        status=status,
        error=None
        if status == "ok"
        else {"class": str(error or status).split(":", 1)[0][:80], "message": str(error)},
    )
