"""AIPerf's per-request export (`profile_export.jsonl`, `--export-level records`).

Each line is `{"metadata": {...}, "metrics": {name: {"value", "unit"}}, "error": {...} | null}`
with wall-clock nanosecond timestamps in `metadata` and durations in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from harness.errors import InputError
from harness.importers.common import (
    NO_TRACE,
    Imported,
    chunk_times,
    need,
    record,
    wall_iso,
)
from harness.schema import Record

EXPORT = "profile_export.jsonl"
PHASES = {"profiling": "measure", "warmup": "warmup"}
NOTES = [
    "AIPerf's 'inter token latency' is (request latency - TTFT) / (output tokens - 1): our TPOT "
    "when it counts the same tokens; its 'output token throughput per user' is our per-request interactivity",
    "AIPerf counts output tokens with its client-side tokenizer unless run with --use-server-token-count; "
    "these records use the server's usage counts when the export has them",
    "chunk_tokens: not in the export; each streamed chunk counts as one token, so ITL here is AIPerf's "
    "inter chunk latency (a multi-token chunk is one gap)",
    NO_TRACE,
    "session structure: AIPerf conversations are imported as main sessions; subagents are not known",
]


def read(path: Path) -> Imported:
    path = path / EXPORT if path.is_dir() else path
    rows = []
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if raw.strip():
                    try:
                        rows.append((lineno, orjson.loads(raw)))
                    except orjson.JSONDecodeError as exc:
                        raise InputError(f"invalid JSON ({exc})", path=path, line=lineno) from exc
    except OSError as exc:
        raise InputError(
            f"cannot read ({exc.strerror}); AIPerf writes {EXPORT} with --export-level records",
            path=path,
        ) from exc
    if not rows:
        raise InputError("no records in the export", path=path)
    t0 = min(_ns(r, "credit_issued_ns", "request_start_ns") for _, r in rows)
    records = [_record(r, t0, path, lineno) for lineno, r in rows]
    return Imported("aiperf", path, records, list(NOTES), started_at=wall_iso(t0 / 1e9))


def _ns(row: dict, *keys: str) -> int:
    meta = row.get("metadata", {})
    return next(meta[k] for k in keys if meta.get(k) is not None)


def _metric(metrics: dict, name: str):
    m = metrics.get(name)
    return None if m is None else m.get("value")


def _record(row: dict, t0: int, path: Path, lineno: int) -> Record:
    meta = need(row, "metadata", path, f"line {lineno}")
    metrics = row.get("metrics") or {}
    start = need(meta, "request_start_ns", path, f"line {lineno}")
    clock = lambda ns: None if ns is None else (ns - t0) / 1e9  # noqa: E731
    t_sent = clock(start)
    ttft_ms = _metric(metrics, "time_to_first_token")
    times = []
    if ttft_ms is not None:
        gaps = [g / 1e3 for g in (_metric(metrics, "inter_chunk_latency") or [])]
        times = chunk_times(t_sent + ttft_ms / 1e3, gaps)
    error = row.get("error")
    status = "cancelled" if meta.get("was_cancelled") else ("error" if error else "ok")
    return record(
        request_id=meta.get("x_request_id") or f"aiperf-{lineno}",
        session_id=str(
            meta.get("conversation_id") or meta.get("x_correlation_id") or f"aiperf-{lineno}"
        ),
        turn=meta.get("turn_index") or 0,
        t_scheduled=clock(meta.get("credit_issued_ns")),
        t_sent=t_sent,
        t_first_token=times[0] if times else None,
        t_last_token=times[-1] if times else None,
        t_done=clock(meta.get("request_end_ns")),
        chunk_times=times,
        prompt_tokens_expected=_metric(metrics, "input_sequence_length"),
        prompt_tokens=_metric(metrics, "usage_prompt_tokens"),
        completion_tokens=_metric(metrics, "usage_completion_tokens")
        or _metric(metrics, "output_sequence_length"),
        cached_tokens=_metric(metrics, "usage_prompt_cache_read_tokens"),
        status=status,
        error=None
        if not error
        else {
            "class": error.get("type") or f"HTTP {error.get('code')}",
            "message": error.get("message", ""),
        },
        phase=PHASES.get(meta.get("benchmark_phase"), "measure"),
    )
