"""The record and run-folder schema shared by the driver (writer) and the analyzer (reader).

This module holds the shared types and names: it is the code form of the "Records and the run folder" section
of docs/architecture.md, so neither side imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, NotRequired, cast, get_type_hints

# typing_extensions's TypedDict: pydantic reads it on Python 3.11 (the published JSON Schema,
# harness/export/json_schema.py); typing's only from 3.12
from typing_extensions import TypedDict

RECORD_SCHEMA_VERSION = 1

# A record's `error`: the failure's class and message, and the server's Retry-After when it sent one.
ErrorInfo = TypedDict(
    "ErrorInfo",
    {
        "class": str,
        "message": str,  # one line
        "retry_after_s": NotRequired[float],
        "body": NotRequired[str],  # the server's error body, when the message shortened it
    },
)


class WireInfo(TypedDict, total=False):
    """What the wire did beyond one send (null when nothing): a resend on a fresh connection
    after a reused one closed before any answer, and redirects followed."""

    resent: int
    resent_why: str
    redirects: list[str]  # "307 http://host:port/path", each hop in order


class Record(TypedDict):
    """One request, one JSON object in records.jsonl, appended as the request ends. This is the
    one declaration of the record: the driver writes it, the importers write it, the loader and
    records.parquet type their columns from it (`FLOAT_FIELDS`, `COUNT_FIELDS`)."""

    run_id: str | None
    request_id: str
    session_id: str
    parent_session_id: str | None
    agent: str  # "main" | "sub"
    turn: int
    endpoint: str | None
    t_scheduled: float | None  # intended send time (s, run clock): open-loop lateness is visible
    t_sent: float | None
    t_first_token: float | None
    t_last_token: float | None
    t_done: float | None
    chunk_times: list[float]  # one per streamed chunk that carried output
    chunk_tokens: list[int]  # tokens in that chunk (1 when the server does not say)
    prompt_tokens_expected: int | None
    output_tokens_expected: int | None
    cached_tokens_ideal: int | None  # the analyzer's (analysis.ideal); null from the driver
    prompt_tokens: int | None  # as the server reported; null if not reported
    completion_tokens: int | None
    cached_tokens: int | None
    cached_tokens_device: int | None  # cached_tokens by the tier it came from, where the server
    cached_tokens_cpu: int | None  # says (the reference engine; SGLang's cached_tokens_details)
    cached_tokens_disk: int | None
    cached_tokens_remote: int | None
    spec_drafts: int | None  # speculative decoding of this request, where the server says
    spec_draft_tokens: int | None  # (vLLM's per-request metrics.speculative_decoding): verify
    spec_accepted_tokens: int | None  # steps, tokens drafted, draft tokens accepted
    cache_creation_tokens: int | None  # Anthropic's usage as sent: cache_creation_input_tokens,
    cache_creation_5m_tokens: int | None  # and cache_creation.ephemeral_5m_input_tokens,
    cache_creation_1h_tokens: int | None  # .ephemeral_1h_input_tokens; null elsewhere
    status: str  # a STATUSES value
    error: ErrorInfo | None
    phase: str  # a PHASES value
    attempt: int  # 1, 2, ...: the n-th send of this turn (retries); absent in older runs = 1
    wire: WireInfo | None  # resends and redirects (driver/http); absent in older runs = null


RECORD_FIELDS: tuple[str, ...] = tuple(Record.__annotations__)
_TYPES = get_type_hints(Record)
# Times (seconds) and counts: numeric columns; a count is float in a frame so "not reported" is NaN.
FLOAT_FIELDS = tuple(f for f in RECORD_FIELDS if _TYPES[f] == float | None)
COUNT_FIELDS = tuple(f for f in RECORD_FIELDS if _TYPES[f] in (int, int | None))
# What a record holds before its request has an outcome (its two lists made new per record).
_BLANK: dict[str, Any] = {
    **dict.fromkeys(RECORD_FIELDS),
    "agent": "main",
    "phase": "measure",
    "attempt": 1,
}
_KNOWN = frozenset(RECORD_FIELDS)


def new_record(**fields: Any) -> Record:
    """A record with every field: `fields`, else its default (None for most), new lists."""
    if not _KNOWN.issuperset(fields):  # the driver makes one per request: a copy, no loops
        raise ValueError(f"not record fields: {sorted(fields.keys() - _KNOWN)}")
    rec = _BLANK.copy()
    rec["chunk_times"], rec["chunk_tokens"] = [], []
    rec.update(fields)
    return cast(Record, rec)


AGENTS = ("main", "sub")
STATUSES = ("ok", "error", "timeout", "cancelled")
PHASES = ("warmup", "measure", "cooldown")

# Files of a run folder results/<run-id>/.
RECORDS_FILE = "records.jsonl"
PARQUET_FILE = "records.parquet"  # the records as typed columns, with the [parquet] extra
MANIFEST_FILE = "manifest.json"
SCENARIO_FILE = "scenario.yaml"
TRACE_FILE = "trace.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
CLIENT_FILE = "client.json"  # the driver's self-check samples (harness.driver.live.selfcheck)

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


@dataclass(frozen=True)
class ReplaySettings:
    """The manifest's `replay` section as the analyzer reads it: the driver's settings that change
    what the records mean. Each name is a field of the driver's replay configuration, which
    writes the section (tests/test_schema.py holds the two together); absent keys (older runs,
    imported runs) read as these defaults."""

    load: str = "closed"  # closed, open, timestamps
    concurrency: int | None = None  # closed loop: the tasks held in flight
    session_rate: float | None = None  # open loop: main sessions per second
    arrival: str | None = None  # open loop: poisson or constant
    time_scale: float | None = None  # timestamp replay: the trace's clock scaled
    window: str | None = None  # the measured window the run asked for: phases or steady
    salt: str | None = None  # the content salt: the ideal rebuilds prompts with it
    api: str | None = None  # chat, completions, messages or responses
    prompt_format: str = "tokens"  # completions: token ids or text
    tokenizer: str | None = None  # the tokenizer the driver fitted text with
    history: str = "recorded"  # recorded or live replies in the history
    previous_response_id: bool = False  # responses: the server kept the history
    # How a server counts the API's prompts (the API's registry entry in the driver); None in
    # runs written before the manifest said (the analyzer then goes by the API's name)
    chat_template: bool | None = None  # chat messages rendered with the chat template
    special_tokens: bool | None = None  # the tokenizer's special tokens added to that render
    server_history: str | None = None  # the option that had the server keep the history

    @classmethod
    def of(cls, manifest: dict) -> ReplaySettings:
        replay = manifest.get("replay")
        if not isinstance(replay, dict):
            return cls()
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in replay.items() if k in names and v is not None})
