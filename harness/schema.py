"""The record and run-folder schema shared by the driver (writer) and the analyzer (reader).

This module holds names only: it is the code form of the "Records and the run folder" section
of docs/architecture.md, so neither side imports the other.
"""

from __future__ import annotations

from enum import StrEnum

RECORD_SCHEMA_VERSION = 1

# One JSON object per request, appended to records.jsonl as each request ends.
RECORD_FIELDS: tuple[str, ...] = (
    "run_id",
    "request_id",
    "session_id",
    "parent_session_id",
    "agent",  # "main" | "sub"
    "turn",
    "endpoint",
    "t_scheduled",  # intended send time (s, run clock): open-loop lateness is visible
    "t_sent",
    "t_first_token",
    "t_last_token",
    "t_done",
    "chunk_times",  # list[float], one per streamed chunk that carried output
    "chunk_tokens",  # list[int], tokens in that chunk (1 when the server does not say)
    "prompt_tokens_expected",
    "output_tokens_expected",
    "cached_tokens_ideal",
    "prompt_tokens",  # as the server reported; null if not reported
    "completion_tokens",
    "cached_tokens",
    "status",  # "ok" | "error" | "timeout" | "cancelled"
    "error",  # null, or {"class": str, "message": str}
    "phase",  # "warmup" | "measure" | "cooldown"
    "attempt",  # 1, 2, ...: the n-th send of this turn (retries); absent in older runs = 1
)

AGENTS = ("main", "sub")
STATUSES = ("ok", "error", "timeout", "cancelled")
PHASES = ("warmup", "measure", "cooldown")

# Files of a run folder results/<run-id>/.
RECORDS_FILE = "records.jsonl"
MANIFEST_FILE = "manifest.json"
SCENARIO_FILE = "scenario.yaml"
TRACE_FILE = "trace.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
CLIENT_FILE = "client.json"  # the driver's self-check samples (harness.driver.selfcheck)

# manifest.json keys every writer sets (others may be added freely):
MANIFEST_REQUIRED = (
    "schema_version",  # == RECORD_SCHEMA_VERSION
    "run_id",
    "harness_version",
    "started_at",  # ISO-8601 wall clock
    "ended_at",  # null while running / after a crash
    "status",  # a RunStatus
)


class RunStatus(StrEnum):
    """How a run ended (manifest `status`); `running` until it does."""

    RUNNING = "running"
    COMPLETE = "complete"  # every planned request was sent (or a bound stopped it)
    PARTIAL = "partial"  # complete, but a Ray load worker was lost: its in-flight requests failed
    INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM; what was sent is recorded
    FAILED = "failed"  # the run stopped on an error before it could finish


# Optional, read when present: git_commit, machine, seed, n_gpus, target, trace_sha256,
# block_size, endpoints, clock ("perf_counter"), t0_wall (wall clock at run clock 0),
# simulated (bool: the engine's simulated runner produced the timings), server_metrics
# ({"before": [...], "after": [...]}: per endpoint, the prefix-cache counters scraped from
# /metrics, or null where it had none).
