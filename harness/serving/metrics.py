"""`/metrics`: the engine's counters in Prometheus text format, under vLLM's metric names.

Engine-side numbers come from `AsyncEngine.stats()`; the server adds what only it sees: finished
requests by reason, the cached tokens it reported per request (so a reader can check that
`vllm:prefix_cache_hits_total` agrees with the sum of `usage.prompt_tokens_details.cached_tokens`),
and TTFT / end-to-end latency histograms measured at the server.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from harness.serving.async_engine import EngineStats

# vLLM's buckets for the same histograms
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out, running = [], 0
        counts = self.counts or [0] * (len(self.buckets) + 1)
        for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{name}_bucket{{{labels},le="{le}"}} {running}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.n}")
        return out


@dataclass
class ServerMetrics:
    finished: Counter = field(default_factory=Counter)  # finish_reason -> requests
    cached_tokens_reported: int = 0
    cached_tokens_cpu_reported: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))

    def request_done(self, finish_reason: str, cached: int, cached_cpu: int, e2e_s: float) -> None:
        self.finished[finish_reason] += 1
        self.cached_tokens_reported += cached
        self.cached_tokens_cpu_reported += cached_cpu
        self.e2e.observe(e2e_s)


_GAUGES = (
    ("vllm:num_requests_running", "num_running", "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", "num_waiting", "Number of requests waiting to be processed."),
    ("vllm:kv_cache_usage_perc", "kv_cache_usage", "KV-cache usage. 1 means 100 percent usage."),
)
_COUNTERS = (
    (
        "vllm:prefix_cache_queries_total",
        "prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
    ),
    (
        "vllm:prefix_cache_hits_total",
        "prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens (device and CPU tier).",
    ),
    ("vllm:num_preemptions_total", "num_preemptions", "Cumulative number of preemptions."),
    ("vllm:prompt_tokens_total", "prompt_tokens_total", "Number of prefill tokens processed."),
    (
        "vllm:generation_tokens_total",
        "generation_tokens_total",
        "Number of generation tokens processed.",
    ),
    (
        "harness:cpu_prefix_cache_hits_total",
        "cpu_cache_hits",
        "Prefix cache hits served from the CPU tier (tokens; included in vllm:prefix_cache_hits_total).",
    ),
    ("harness:engine_steps_total", "num_steps", "Engine steps run."),
    (
        "harness:kv_snapshots_total",
        "kv_snapshots_total",
        "Sliding-window states retained (snapshots) under the prefix-cache retention policy.",
    ),
)
_KV_GAUGES = (
    (
        "harness:kv_blocks_in_use",
        "KV blocks held by requests, by attention type (one shared pool).",
        (("full", "kv_blocks_full"), ("sliding", "kv_blocks_sliding")),
    ),
    (
        "harness:kv_blocks_in_use_peak",
        "Most KV blocks held by requests at once, by attention type.",
        (("full", "kv_blocks_full_peak"), ("sliding", "kv_blocks_sliding_peak")),
    ),
)


def render(
    stats: EngineStats,
    server: ServerMetrics,
    model_name: str,
    *,
    block_size: int | None = None,
    identity: dict | None = None,
) -> str:
    labels = f'model_name="{_escape(model_name)}"'
    lines: list[str] = []

    def family(name: str, kind: str, help_: str, samples: list[str]) -> None:
        lines.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *samples])

    if block_size is not None:  # as vLLM exports its cache configuration: the granularity of hits
        family(
            "vllm:cache_config_info",
            "gauge",
            "Information of the KV cache configuration.",
            [f'vllm:cache_config_info{{block_size="{block_size}"}} 1.0'],
        )
    if identity is not None:  # an info gauge, as vLLM's cache_config_info: labels carry the facts
        family(
            "harness:engine_info",
            "gauge",
            "What produces the timings: runner (torch | simulated) and device.",
            [f"harness:engine_info{{{labels},{_info_labels(identity)}}} 1.0"],
        )
    for name, attr, help_ in _GAUGES:
        family(name, "gauge", help_, [f"{name}{{{labels}}} {float(getattr(stats, attr))}"])
    for name, attr, help_ in _COUNTERS:
        family(name, "counter", help_, [f"{name}{{{labels}}} {int(getattr(stats, attr))}"])
    for name, help_, kinds in _KV_GAUGES:
        family(
            name,
            "gauge",
            help_,
            [
                f'{name}{{{labels},kv_type="{kind}"}} {float(getattr(stats, attr))}'
                for kind, attr in kinds
            ],
        )
    family(
        "harness:kv_snapshot_blocks",
        "gauge",
        "Free sliding-window KV blocks kept by snapshots (reusable by a prefix hit).",
        [f"harness:kv_snapshot_blocks{{{labels}}} {float(stats.kv_snapshot_blocks)}"],
    )
    reasons = sorted(set(server.finished) | {"stop", "length", "abort"})
    family(
        "vllm:request_success_total",
        "counter",
        "Count of finished requests, by finish reason.",
        [
            f'vllm:request_success_total{{{labels},finished_reason="{r}"}} {server.finished[r]}'
            for r in reasons
        ],
    )
    family(
        "harness:cached_tokens_reported_total",
        "counter",
        "Sum of usage.prompt_tokens_details.cached_tokens over finished requests.",
        [f"harness:cached_tokens_reported_total{{{labels}}} {server.cached_tokens_reported}"],
    )
    family(
        "vllm:time_to_first_token_seconds",
        "histogram",
        "Time to first token, at the server.",
        server.ttft.lines("vllm:time_to_first_token_seconds", labels),
    )
    family(
        "vllm:e2e_request_latency_seconds",
        "histogram",
        "End-to-end request latency, at the server.",
        server.e2e.lines("vllm:e2e_request_latency_seconds", labels),
    )
    return "\n".join(lines) + "\n"


def _info_labels(identity: dict) -> str:
    keys = ("runner", "device", "simulated", "modelled_device")
    return ",".join(
        f'{k}="{_escape(str(identity[k]).lower() if k == "simulated" else str(identity[k]))}"'
        for k in keys
        if identity.get(k) is not None
    )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
