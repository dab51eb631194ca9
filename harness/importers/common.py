"""What every importer shares: the record it fills in and the run folder it writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.driver.runfolder import RunFolder
from harness.errors import InputError
from harness.schema import Record, RunStatus, new_record

# Fields no other tool's export has: our trace's expectations and its ideal cache.
NO_TRACE = (
    "cached_tokens_ideal: no trace, so no per-request ideal; the ideal hit rate is the tool's own "
    "(imported.ideal, with its definition) or null, never 0, and misses cannot be split by cause"
)


@dataclass
class Imported:
    tool: str  # "aiperf" | "vllm-bench" | "guidellm"
    source: Path
    records: list[Record]
    notes: list[str] = field(default_factory=list)  # definitions that differ, fields not available
    started_at: str | None = None  # ISO-8601 wall clock of the first send, when the export says
    meta: dict = field(default_factory=dict)  # the tool's own run settings worth keeping
    # the tool's own ideal prefix-cache hit: {hit_rate (0-1), definition, source, ...}, or None
    ideal: dict | None = None


def record(**values) -> Record:
    """A record of another tool's request: what its export has, the schema's defaults otherwise
    (one turn of a main session, measured, ok unless the export says it failed)."""
    return new_record(**{"turn": 0, "status": "ok", **values})


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
    """The run folder of an import, written as every run folder is: through `RunFolder`."""
    out = Path(out)
    run_id = run_id or out.name
    origin = {
        "tool": imported.tool,
        "source": str(imported.source),
        "notes": imported.notes,
        "ideal": imported.ideal,
    }
    with RunFolder(
        out,
        run_id,
        started_at=imported.started_at,  # the tool's run, not this import
        machine=None,  # the tool ran elsewhere; the export does not say where
        clock=None,
        imported={**origin, "settings": imported.meta},
    ) as folder:
        for rec in imported.records:
            folder.write({**rec, "run_id": run_id})
        folder.close(RunStatus.COMPLETE)
    return out
