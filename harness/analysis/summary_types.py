"""The shape of `summary.json` (version `SUMMARY_VERSION`), as types that mypy checks.

The analyzer (analysis/summary.py) writes a `Summary`; the report, `harness compare` and the
dashboards' notebooks read one, so a key that is misspelled or gone is a type error where it is
read, not a KeyError in front of a reader. The keys and their meaning are documented in
docs/metrics.md; the deeper, open-ended parts (per-group tables, what was tested, an import's
notes) stay `dict[str, Any]`. TypedDicts, not pydantic: the summary is the analyzer's own output,
read back by our own code, so it needs checking where it is read (mypy), not validating at run
time; and a dict stays what json.dump writes.

`Analysis` is here too, so that presentation can name it without importing the analyzer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import TypedDict  # pydantic reads it on 3.11 (harness/export/json_schema.py)

from harness.analysis import histograms

if TYPE_CHECKING:
    import pandas as pd

    from harness.analysis.ideal.walk import Ideal
    from harness.analysis.in_flight import InFlight
    from harness.analysis.loader import Run
    from harness.analysis.metrics import InterTokenLatency
    from harness.analysis.sessions.tasks import TaskGraph

SUMMARY_VERSION = 2

# the summary's keys that hold a latency's `Percentiles`
PercentileKey = Literal[
    "ttft_s", "tpot_s", "itl_s", "e2el_s", "e2el_per_token_s", "interactivity_tok_s"
]


class Percentiles(TypedDict):
    """Nulls when there were no finite values; `count` is how many there were."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    max: float | None
    count: int


class Excluded(TypedDict):
    warmup: int
    cooldown: int


class TpgsParts(TypedDict):
    cached: float | None
    uncached_input: float | None
    output: float | None


class Throughput(TypedDict):
    duration_s: float
    requests_per_s: float | None
    input_tokens_per_s: float | None
    output_tokens_per_s: float | None
    total_tokens_per_s: float | None
    sessions_per_s: float | None


class CacheSummary(TypedDict, total=False):
    """`cache`: the hit rates, where the missed tokens went, and the breakdowns (`by_agent`,
    `by_endpoint`, `by_turn`, `by_time`, `by_segment`, `by_call_kind`: group -> row)."""

    cache_hit_rate: float | None
    ideal_cache_hit_rate: float | None
    ideal_cache_hit_rate_all: float | None
    requests: int
    requests_reported: int
    prompt_tokens: float
    miss_tokens: dict[str, Any]
    missed_tokens: float
    miss_share_of_prompt_tokens: dict[str, Any]
    miss_share_of_missed_tokens: dict[str, Any]
    beyond_ideal_tokens: float
    requests_by_miss_class: dict[str, int]
    granularity: dict[str, Any]
    server_rules: dict[str, Any]
    ideal: dict[str, Any]
    token_space: dict[str, Any] | None
    session_moves: dict[str, Any] | None
    tiers: dict[str, Any] | None
    hosted: dict[str, Any] | None
    by_agent: dict[str, dict[str, Any]]
    by_endpoint: dict[str, dict[str, Any]]
    by_turn: dict[str, dict[str, Any]]
    by_time: dict[str, dict[str, Any]]
    by_segment: dict[str, dict[str, Any]]
    segments: dict[str, Any]
    by_call_kind: dict[str, dict[str, Any]]
    call_kinds: dict[str, Any]


class ServerCache(TypedDict):
    queries: float
    hits: float
    hit_rate: float | None
    endpoints_scraped: int


class RunEnd(TypedDict):
    status: str | None
    stopped_by: str | None
    unsent_requests: int | None
    note: str | None


class Sessions(TypedDict, total=False):
    structure: str
    tasks: int
    tasks_complete: int | None
    sessions: int
    task_completion_s: Percentiles
    critical_path_service_s: Percentiles
    critical_path_requests: Percentiles
    join_wait_s: Percentiles
    session_ttft_mean_s: Percentiles
    tasks_complete_by_tool: int | None
    tasks_exported_ok: int


class Window(TypedDict, total=False):
    """The measured window (docs/metrics.md, The measured window); times on the run's clock."""

    mode: str
    start_s: float
    end_s: float
    stable: bool
    reason: str
    requests_remarked: int
    rule: dict[str, Any]
    target_tasks: int | None
    tasks_in_flight_mean: float | None
    tasks_held: float | None
    requests_in_flight_mean: float | None


class Validity(TypedDict):
    valid: bool
    reasons: list[str]


class Counts(TypedDict):
    requests_total: int
    requests_ok: int
    requests_failed: int  # errors and timeouts; a request the run's own stop cancelled is not one
    requests_cancelled: int
    requests_excluded: Excluded
    status_counts: dict[str, int]


class Summary(Counts):
    summary_version: int
    run_id: str
    simulated: bool
    imported: dict[str, Any] | None
    tested: dict[str, Any]
    errors_by_class: dict[str, int]
    streamed: dict[str, Any] | None
    short_replies: dict[str, Any] | None
    streaming: dict[str, Any] | None  # reads per reply, buffered or not (analysis/buffering.py)
    ttft_s: Percentiles
    tpot_s: Percentiles
    itl_s: Percentiles
    e2el_s: Percentiles
    e2el_per_token_s: Percentiles
    interactivity_tok_s: Percentiles
    interactivity_p90: float | None
    e2e_interactivity_p90: float | None
    n_gpus: float
    n_gpus_source: str
    tpgs: float | None
    tpgs_parts: TpgsParts
    throughput: Throughput
    goodput: dict[str, Any] | None
    cache_hit_rate: float | None
    ideal_cache_hit_rate: float | None
    cache: CacheSummary
    server_cache: ServerCache | None
    context_limit: dict[str, Any]
    validity: Validity
    speculative_decoding: dict[str, Any] | None
    run_end: RunEnd
    sessions: Sessions
    retries: dict[str, Any]
    window: Window
    timeline: dict[str, Any]
    client: dict[str, Any]
    warnings: list[str]


@dataclass
class Analysis:
    run: Run  # the run as analyzed: its own records (final attempts, tasks, window, the ideal)
    ideal: Ideal  # how the ideal cache hit was obtained
    per_request: pd.DataFrame  # metrics.request_metrics of the ok records
    itl: InterTokenLatency
    misses: pd.DataFrame  # cache.attribute_misses of the ok records
    # cache.group_tables: hit vs ideal by agent, endpoint, turn and time
    tables: dict[str, pd.DataFrame]
    tasks: pd.DataFrame  # sessions.task_table of all records
    graph: TaskGraph  # requests and their spawn/join edges, for critical paths
    summary: Summary
    in_flight: InFlight  # tasks and requests in flight over the run (analysis/in_flight.py)

    def histograms(self) -> dict:
        h = {m: histograms.histogram_of(self.per_request[m]) for m in ("ttft", "tpot", "e2el")}
        h["itl"] = histograms.histogram_of(self.itl.values, self.itl.weights)
        return h
