"""What every importer shares: the record it fills in and the run folder it writes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import orjson

from harness import __version__
from harness.errors import InputError
from harness.schema import MANIFEST_FILE, RECORD_FIELDS, RECORD_SCHEMA_VERSION, RECORDS_FILE

# Fields no other tool's export has: our trace's expectations and its ideal cache.
NO_TRACE = "cached_tokens_ideal (no trace: the ideal cache hit rate is not available and reads 0)"


@dataclass
class Imported:
    tool: str  # "aiperf" | "vllm-bench" | "guidellm"
    source: Path
    records: list[dict]
    notes: list[str] = field(default_factory=list)  # definitions that differ, fields not available
    started_at: str | None = None  # ISO-8601 wall clock of the first send, when the export says
    meta: dict = field(default_factory=dict)  # the tool's own run settings worth keeping


def record(**values) -> dict:
    """A record with every schema field, None where the export has nothing for it."""
    unknown = set(values) - set(RECORD_FIELDS)
    if unknown:
        raise ValueError(f"not record fields: {sorted(unknown)}")
    out = dict.fromkeys(RECORD_FIELDS)
    out.update(agent="main", turn=0, chunk_times=[], chunk_tokens=[], phase="measure", status="ok")
    out.update(values)
    return out


def chunk_times(t_first: float, gaps_s: list[float]) -> list[float]:
    """Arrival times of each streamed chunk: the first at t_first, then each gap after the last."""
    times = [t_first]
    for gap in gaps_s:
        times.append(times[-1] + gap)
    return times


def wall_iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def need(obj: dict, key: str, path: Path, where: str):
    if key not in obj:
        raise InputError(
            f"missing {key!r} ({where}); is this the right tool's export?", path=path, field=key
        )
    return obj[key]


def write_imported(imported: Imported, out: str | Path, run_id: str | None = None) -> Path:
    out = Path(out)
    if (out / RECORDS_FILE).exists():
        raise InputError("already holds records.jsonl; choose a new folder", path=out)
    out.mkdir(parents=True, exist_ok=True)
    run_id = run_id or out.name
    manifest = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "run_id": run_id,
        "harness_version": __version__,
        "started_at": imported.started_at,
        "ended_at": None,
        "status": "complete",
        "imported": {
            "tool": imported.tool,
            "source": str(imported.source),
            "notes": imported.notes,
            "settings": imported.meta,
        },
    }
    with (out / RECORDS_FILE).open("wb") as fh:
        for rec in imported.records:
            fh.write(orjson.dumps({**rec, "run_id": run_id}, option=orjson.OPT_APPEND_NEWLINE))
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return out
