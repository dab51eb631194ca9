"""The live metrics, declared once: name, type, unit, labels, help and the OpenTelemetry GenAI
semantic convention each follows (docs/export.md's mapping table is checked against this one).

Names follow Prometheus' conventions (base unit in the name, `_total` on counters) and, where the
GenAI conventions define the measurement, their name as Prometheus translates an OTLP metric
(dots to underscores, the unit appended: `gen_ai.client.operation.duration` in seconds is
`gen_ai_client_operation_duration_seconds`).
"""

from __future__ import annotations

from dataclasses import dataclass

# The labels of every per-request series: which run, where it went, through which API, sent by
# the main agent or a subagent, and in which phase of the run (only `measure` is in summary.json).
REQUEST_LABELS = ("run_id", "endpoint", "api", "call_kind", "phase")


def _ladder(lo_exp: int, hi: float) -> tuple[float, ...]:
    """1, 1.5, 2, 3, 5, 7.5 per decade from 10**lo_exp up to `hi`: a quantile read from the
    buckets is within ~25-50 % of a bucket's value, at 6 buckets a decade."""
    steps = (1.0, 1.5, 2.0, 3.0, 5.0, 7.5)
    out: list[float] = []
    exp = lo_exp
    while True:
        for s in steps:
            v = round(s * 10.0**exp, 9)
            if v > hi:
                return tuple(out)
            out.append(v)
        exp += 1


LATENCY_BUCKETS = _ladder(-3, 600.0)  # 1 ms .. 600 s: TTFT and end-to-end latency
TOKEN_TIME_BUCKETS = _ladder(-4, 10.0)  # 0.1 ms .. 10 s: TPOT and ITL
# the GenAI conventions' advised boundaries for gen_ai.client.token.usage
TOKEN_BUCKETS = tuple(float(4**k) for k in range(14))


@dataclass(frozen=True)
class Metric:
    name: str  # the exposed name, without `_total` (counters) or `_bucket` (histograms)
    kind: str  # counter, gauge, histogram
    help: str
    labels: tuple[str, ...]
    semconv: str | None = None  # the GenAI convention's metric it is, when there is one
    buckets: tuple[float, ...] = ()


REQUESTS = Metric(
    "harness_requests",
    "counter",
    "Requests that ended, by status (ok, error, timeout, cancelled).",
    (*REQUEST_LABELS, "status"),
)
ERRORS = Metric(
    "harness_request_errors",
    "counter",
    "Requests that failed (error or timeout), by the failure's class (docs/driver.md).",
    (*REQUEST_LABELS, "error_type"),
)
PROMPT_TOKENS = Metric(
    "harness_prompt_tokens",
    "counter",
    "Prompt tokens of ended requests, as the server reported (else as the trace expected).",
    REQUEST_LABELS,
)
CACHED_TOKENS = Metric(
    "harness_cached_prompt_tokens",
    "counter",
    "Prompt tokens the server reported served from its prefix cache.",
    REQUEST_LABELS,
)
CACHE_BASE = Metric(
    "harness_cache_reported_prompt_tokens",
    "counter",
    "Prompt tokens of the requests whose server reported cached tokens: the hit ratio's base.",
    REQUEST_LABELS,
)
OUTPUT_TOKENS = Metric(
    "harness_output_tokens",
    "counter",
    "Output tokens of ended requests, as the server reported (else as streamed).",
    REQUEST_LABELS,
)
TOKEN_USAGE = Metric(
    "gen_ai_client_token_usage",
    "histogram",
    "Tokens per request, by gen_ai_token_type (input, output).",
    (*REQUEST_LABELS, "gen_ai_token_type"),
    "gen_ai.client.token.usage",
    TOKEN_BUCKETS,
)
DURATION = Metric(
    "gen_ai_client_operation_duration_seconds",
    "histogram",
    "End-to-end latency of ok requests: t_done - t_sent.",
    REQUEST_LABELS,
    "gen_ai.client.operation.duration",
    LATENCY_BUCKETS,
)
TTFT = Metric(
    "gen_ai_client_operation_time_to_first_chunk_seconds",
    "histogram",
    "Time to first token of ok requests: t_first_token - t_sent.",
    REQUEST_LABELS,
    "gen_ai.client.operation.time_to_first_chunk",
    LATENCY_BUCKETS,
)
TPOT = Metric(
    "harness_time_per_output_token_seconds",
    "histogram",
    "Time per output token after the first, per ok request with two or more tokens.",
    REQUEST_LABELS,
    None,
    TOKEN_TIME_BUCKETS,
)
ITL = Metric(
    "harness_inter_token_latency_seconds",
    "histogram",
    "Inter-token latency: each gap between chunks over the later chunk's tokens, token-weighted.",
    REQUEST_LABELS,
    None,
    TOKEN_TIME_BUCKETS,
)
IN_FLIGHT = Metric(
    "harness_requests_in_flight", "gauge", "Requests sent and not yet ended.", ("run_id",)
)
SESSIONS = Metric(
    "harness_sessions_active", "gauge", "Sessions (main and subagent) under way.", ("run_id",)
)
TARGET = Metric(
    "harness_target_concurrency",
    "gauge",
    "Closed loop: the tasks the run holds in flight (absent for open-loop runs).",
    ("run_id",),
)
IDEAL = Metric(
    "harness_trace_ideal_cache_hit_ratio",
    "gauge",
    "The trace's ideal prefix-cache hit ratio (an infinite cache, in the trace's tokens).",
    ("run_id",),
)
RUN_INFO = Metric(
    "harness_run_info",
    "gauge",
    "1 for each run this process has driven, its settings as labels.",
    ("run_id", "scenario", "target", "api", "model", "load"),
)
RUN_START = Metric(
    "harness_run_start_time_seconds",
    "gauge",
    "When the run's clock started (Unix time).",
    ("run_id",),
)

REQUEST_METRICS = (REQUESTS, ERRORS, PROMPT_TOKENS, CACHED_TOKENS, CACHE_BASE, OUTPUT_TOKENS)
HISTOGRAMS = (TOKEN_USAGE, DURATION, TTFT, TPOT, ITL)
RUN_METRICS = (IN_FLIGHT, SESSIONS, TARGET, IDEAL, RUN_INFO, RUN_START)
ALL = (*REQUEST_METRICS, *HISTOGRAMS, *RUN_METRICS)
