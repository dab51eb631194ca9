"""GuideLLM's JSON report (`--output json`, `benchmarks.json`): per benchmark, every request under
`requests.successful / errored / incomplete`, with wall-clock times (s) in `info.timings`.

The report keeps each request's first and last token times but not the chunks in between, so
TTFT, TPOT and E2EL import exactly and the token-weighted ITL is not available.
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
    NO_TRACE,
]


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
    records = [_record(status, r, t0, i) for i, (status, r) in enumerate(rows)]
    records.sort(key=lambda rec: rec["t_sent"] if rec["t_sent"] is not None else float("inf"))
    settings = {
        "profile": (chosen.get("config") or {}).get("strategy"),
        "benchmark": benchmark or 0,
    }
    return Imported("guidellm", path, records, list(NOTES), started_at=wall_iso(t0), meta=settings)


def _timings(r: dict) -> dict:
    return (r.get("info") or {}).get("timings") or {}


def _record(status: str, r: dict, t0: float, i: int) -> Record:
    t = _timings(r)
    clock = lambda s: None if s is None else s - t0  # noqa: E731
    info = r.get("info") or {}
    error = info.get("error")
    return record(
        request_id=r.get("request_id") or f"guidellm-{i}",
        session_id=str(info.get("conversation_id") or r.get("request_id") or f"guidellm-{i}"),
        turn=info.get("turn_index") or 0,
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
