"""manifest.json: what ran, where, when, and how it ended. `RunFolder` writes it (at start,
when facts arrive, at the end); this module builds its content.

Required keys are `harness.schema.MANIFEST_REQUIRED`. No secrets: endpoints lose any user info
and query string, headers are listed by name only, and API keys never reach this file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import subprocess
from pathlib import Path

from harness import __version__
from harness.driver.endpoint import redact_url
from harness.schema import RECORD_SCHEMA_VERSION, RunStatus

__all__ = ["redact_url"]  # here for the readers that import it from the manifest's module


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def git_commit() -> str | None:
    repo = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def machine() -> dict:
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def new_manifest(run_id: str, **extra) -> dict:
    """A manifest with status "running"; `extra` adds the optional keys (seed, endpoints, ...)."""
    m = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "run_id": run_id,
        "harness_version": __version__,
        "started_at": now_iso(),
        "ended_at": None,
        "status": RunStatus.RUNNING.value,
        "git_commit": git_commit(),
        "machine": machine(),
        "clock": "perf_counter",
        # who writes it: a reader that finds `running` and no such process says it crashed
        "writer": {"host": platform.node(), "pid": os.getpid()},
    }
    m.update(extra)
    return m


def replay_fields(trace, config, *, target: dict, endpoints, trace_path=None) -> dict:
    """The manifest keys of a replay (local or Ray): what was sent, to whom, from which trace."""
    return {
        "seed": trace.header.seed,
        "target": target,
        "endpoints": [redact_url(e) for e in endpoints],
        "block_size": config.block_size,
        "trace_sha256": file_sha256(trace_path) if trace_path else None,
        "replay": config.as_dict(),
    }


def started_fields(target: dict, manifest: dict) -> dict:
    """The target as it describes itself once started (an HTTP target has read each endpoint's
    /models card by then: what serves the model, on which device). A run is simulated when its
    scenario says so or any server says its timings come from a simulated runner."""
    return {
        "target": target,
        "simulated": bool(manifest.get("simulated")) or target.get("simulated") is True,
    }
