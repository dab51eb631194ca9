"""AIPerf's per-request export (`profile_export.jsonl`, `--export-level records`).

Each line is `{"metadata": {...}, "metrics": {name: {"value", "unit"}}, "error": {...} | null}`
with wall-clock nanosecond timestamps in `metadata` and durations in milliseconds. Beside it,
`profile_export_aiperf.json` holds AIPerf's aggregates, among them (replaying a Weka/AgentX
trace) `theoretical_prefix_cache_hit`: `{unit: "%", avg, count, sum}`, hit blocks (`sum`) of all
hash-id blocks (`count`) under an infinite per-session cache, counted by its Weka loader; it is
imported as the run's ideal, `imported.ideal` (none when the export has no such figure).

Sessions: AIPerf names each session by `conversation_id` (a Weka subagent's is
`<trace>::sa:<agent>`) and each pass over it by `x_correlation_id`; a subagent's records carry
`agent_depth` >= 1, `source_kind: weka_subagent` and `parent_correlation_id`, and every record of
one task shares `root_correlation_id`. So a record's session is its conversation (a later pass
over the same conversation gets the harness's cycle suffix, `<id>@c1`), a subagent's parent is
the session of its parent correlation id, and `agent` is `sub` at depth >= 1.
"""

from __future__ import annotations

import re
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
AGGREGATES = "profile_export_aiperf.json"
LOG = Path("logs") / "aiperf.log"
PHASES = {"profiling": "measure", "warmup": "warmup"}
IDEAL_DEFINITION = (
    "AIPerf's theoretical_prefix_cache_hit: hash-id blocks an infinite per-session prefix cache "
    "would hit over all blocks of the profiling requests, block-weighted, from its Weka loader "
    "(ours is token-weighted over one shared cache at the server's granularity)"
)
NOTES = [
    "AIPerf's 'inter token latency' is (request latency - TTFT) / (output tokens - 1): our TPOT "
    "when it counts the same tokens; its 'output token throughput per user' is our per-request interactivity",
    "AIPerf counts output tokens with its client-side tokenizer unless run with --use-server-token-count; "
    "these records use the server's usage counts when the export has them",
    "chunk_tokens: not in the export; each streamed chunk counts as one token, so ITL here is AIPerf's "
    "inter chunk latency (a multi-token chunk is one gap)",
    NO_TRACE,
    "tasks: the export does not say how many turns each session had, so a task whose exported "
    "requests all succeeded reads complete; AIPerf's own count of completed sessions (its log) is "
    "imported.settings.sessions_completed",
]
# AIPerf's log line closing the profiling phase: "... | sessions: completed=1, cancelled=0 | ..."
_SESSIONS = re.compile(rb"Phase profiling \(profiling\) complete \|.*?sessions: completed=(\d+)")


def read(path: Path) -> Imported:
    folder = path if path.is_dir() else path.parent
    path = path / EXPORT if path.is_dir() else path
    rows = _rows(path)
    t0 = min(_ns(r, "credit_issued_ns", "request_start_ns") for _, r in rows)
    sessions = _Sessions([r.get("metadata") or {} for _, r in rows])
    records = [_record(r, t0, path, lineno, sessions) for lineno, r in rows]
    ideal = _ideal(folder / AGGREGATES)
    notes = list(NOTES) + ([] if ideal else [f"ideal: {AGGREGATES} has no theoretical hit"])
    settings = {
        "sessions_completed": _sessions_completed(folder / LOG),
        **_stated(folder / AGGREGATES),
    }
    started = wall_iso(t0 / 1e9)
    return Imported("aiperf", path, records, notes, started_at=started, meta=settings, ideal=ideal)


def _rows(path: Path) -> list[tuple[int, dict]]:
    rows = []
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if raw.strip():
                    rows.append((lineno, _json(raw, path, lineno)))
    except OSError as exc:
        raise InputError(
            f"cannot read ({exc.strerror}); AIPerf writes {EXPORT} with --export-level records",
            path=path,
        ) from exc
    if not rows:
        raise InputError("no records in the export", path=path)
    return rows


def _json(raw: bytes, path: Path, lineno: int) -> dict:
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc})", path=path, line=lineno) from exc
    if not isinstance(row, dict):
        raise InputError("expected an object", path=path, line=lineno)
    return row


def _ideal(path: Path) -> dict | None:
    """AIPerf's theoretical prefix-cache hit as a fraction, with its blocks; None without one."""
    try:
        figure = orjson.loads(path.read_bytes()).get("theoretical_prefix_cache_hit")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    if not isinstance(figure, dict) or not figure.get("count"):
        return None
    return {
        "hit_rate": figure["sum"] / figure["count"],
        "hit_blocks": figure["sum"],
        "blocks": figure["count"],
        "definition": IDEAL_DEFINITION,
        "source": f"{AGGREGATES} theoretical_prefix_cache_hit",
    }


def _stated(path: Path) -> dict:
    """The trace and load AIPerf's own config states: its input file (a dataset read from a
    file; generated prompts are no trace) and the profiling phase's concurrency. Compare judges
    an import only against runs that state the same (docs/metrics.md, "Like with like")."""
    try:
        config = orjson.loads(path.read_bytes()).get("input_config") or {}
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return {}
    out: dict = {}
    files = [d for d in config.get("datasets") or [] if d.get("type") == "file" and d.get("path")]
    if files:
        out["trace"] = "; ".join(f"{d['path']} ({d.get('format') or 'file'})" for d in files)
    phases = [p for p in config.get("phases") or [] if p.get("kind") == "profiling"]
    if phases and phases[0].get("concurrency") is not None:
        out["load"] = {"concurrency": phases[0]["concurrency"], "mode": phases[0].get("type")}
    return out


def _sessions_completed(log: Path) -> int | None:
    try:
        found = _SESSIONS.findall(log.read_bytes())
    except OSError:
        return None
    return int(found[-1]) if found else None


class _Sessions:
    """Session ids and parents from AIPerf's conversation and correlation ids."""

    def __init__(self, metas: list[dict]) -> None:
        passes: dict[str, list[str]] = {}
        self.by_correlation: dict[str, str] = {}
        for m in metas:
            conv, corr = m.get("conversation_id"), m.get("x_correlation_id")
            if conv is None or corr is None or corr in self.by_correlation:
                continue
            seen = passes.setdefault(str(conv), [])
            # a later pass is named as the replay names cycles (harness/trace/cycles.py)
            self.by_correlation[corr] = f"{conv}@c{len(seen)}" if seen else str(conv)
            seen.append(corr)

    def of(self, meta: dict, fallback: str) -> str:
        corr = meta.get("x_correlation_id")
        if corr in self.by_correlation:
            return self.by_correlation[corr]
        return str(meta.get("conversation_id") or corr or fallback)

    def parent(self, meta: dict) -> str | None:
        if not meta.get("agent_depth"):
            return None
        parent = meta.get("parent_correlation_id") or meta.get("root_correlation_id")
        return self.by_correlation.get(parent) if parent is not None else None


def _ns(row: dict, *keys: str) -> int:
    meta = row.get("metadata", {})
    return next(meta[k] for k in keys if meta.get(k) is not None)


def _metric(metrics: dict, name: str):
    m = metrics.get(name)
    return None if m is None else m.get("value")


def _record(row: dict, t0: int, path: Path, lineno: int, sessions: _Sessions) -> Record:
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
    parent = sessions.parent(meta)
    return record(
        request_id=meta.get("x_request_id") or f"aiperf-{lineno}",
        session_id=sessions.of(meta, f"aiperf-{lineno}"),
        parent_session_id=parent,
        agent="sub" if meta.get("agent_depth") else "main",
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
