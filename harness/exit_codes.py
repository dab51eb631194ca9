"""The exit codes of every verb, one table (docs/driver.md, "Exit codes"); a run's judged from its
folder once it has ended, a verdict's (compare, gate, trend) from the verdict."""

from __future__ import annotations

import resource
from pathlib import Path

import orjson

from harness.errors import InputError
from harness.schema import RECORDS_FILE

OK = 0
FAILED_GATE = 1  # ran, but no measured request succeeded, the window is empty, or too many failed
BAD_INPUT = 2  # bad input, preflight, or the run could not be written (HarnessError)
CUT_SHORT = 3  # partial (a Ray worker lost) or not closed
INCONCLUSIVE = 4  # compare / trend / gate: the evidence decides neither way (more runs would)
NOT_COMPARABLE = 5  # compare / trend / gate: the runs differ in trace, load or configuration
INTERRUPTED = 130  # Ctrl-C / SIGTERM

FD_RESERVE = 64  # descriptors kept for files, the loop, the servers a scenario starts


def measured_counts(run_dir: Path) -> tuple[int, int]:
    """(measured requests, measured failures: error or timeout) from records.jsonl."""
    total = failed = 0
    path = run_dir / RECORDS_FILE
    if not path.is_file():
        return 0, 0
    with path.open("rb") as fh:
        for line in fh:
            rec = orjson.loads(line)
            if rec.get("phase") == "measure" and rec.get("status") != "cancelled":
                total += 1
                failed += rec.get("status") in ("error", "timeout")
    return total, failed


def judge(status: str, total: int, failed: int, max_failures: float) -> tuple[int, str | None]:
    """The exit code of a run that ended with `status`, and the one-line reason when not 0."""
    if status == "interrupted":
        return INTERRUPTED, "interrupted: the run was cut short"
    if status in ("partial", "running"):
        return CUT_SHORT, f"the run is {status}: a load worker was lost or it was not closed"
    if total == 0:
        return FAILED_GATE, "the measured window is empty (warm-up, cool-down or no requests)"
    if failed == total:
        return FAILED_GATE, f"no measured request succeeded ({failed} of {total} failed)"
    if failed > max_failures * total:
        share = f"{failed} of {total} measured requests failed ({failed / total:.1%})"
        return FAILED_GATE, f"{share}, above --max-failures {max_failures:g}"
    return OK, None


def check_concurrency(concurrency: int, sessions: int, connections: int) -> None:
    """Refuse a closed loop the trace or the process cannot hold (one line, before the run)."""
    if concurrency > 100 * max(sessions, 1):
        raise InputError(
            f"{concurrency} concurrent sessions on a trace of {sessions} main sessions (at most "
            "100 per main session)",
            field="load.concurrency",
        )
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and connections > soft - FD_RESERVE:
        raise InputError(
            f"{concurrency} concurrent sessions need up to {connections} connections, above "
            f"`ulimit -n` {soft} (raise it, or set target.max_connections)",
            field="load.concurrency",
        )
