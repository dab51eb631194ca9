"""How a run ended, in words, from its manifest: closed (and by what), or never closed (its writer
crashed or was killed, or is still running). Only the second kind "ended badly"."""

from __future__ import annotations

import os
import platform

CLEAN = frozenset({"trace_end", "max_duration", "max_requests", "max_sessions"})


def writer_alive(manifest: dict) -> bool | None:
    """Whether the process that writes the manifest still runs; None when that cannot be told
    (another host, or a manifest that does not name its writer)."""
    w = manifest.get("writer") or {}
    if not w.get("pid") or w.get("host") != platform.node():
        return None
    try:
        os.kill(int(w["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def run_ending(manifest: dict) -> str | None:
    """One line when the run did not end cleanly (cut short, failed, partial), else None."""
    status, by = manifest.get("status"), manifest.get("stopped_by")
    if not manifest or status is None:
        return None
    if status == "running":
        alive = writer_alive(manifest)
        if alive:
            return "still running (its writer is alive): the figures are of a run in progress"
        why = "its writer is gone" if alive is False else "its writer cannot be checked"
        return f"crashed / not closed: status 'running', {why}; the run was cut short"
    if status == "interrupted":
        return "interrupted (signal): the run was cut short; in-flight requests are 'cancelled'"
    if status == "failed":
        error = manifest.get("error")
        return f"failed ({by or 'error'}{': ' + error if error else ''}): the run was cut short"
    if status == "partial":
        return "partial: a load worker was lost; its in-flight requests failed"
    # A stop the scenario asked for (max_duration, max_requests, max_sessions, the trace's end) is
    # an ending, not a fault, even with requests left unsent: the what-was-tested block says it.
    return None


def ended_cleanly(manifest: dict) -> bool:
    """Closed complete (a gate may judge it)."""
    return manifest.get("status") == "complete"
