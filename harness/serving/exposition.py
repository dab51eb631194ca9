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

from harness.serving.async_engine import EngineStats, RequestOutput

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


TIERS = ("device", "cpu", "disk", "remote")  # engine.tiers.stack.TIERS
# vLLM's `source` label of vllm:prompt_tokens_cached_by_source for each of our tiers (its
# CacheHitSource: a remote store that is not another vLLM instance is "external_unspecified").
VLLM_SOURCES = {
    "device": "device",
    "cpu": "host",
    "disk": "disk",
    "remote": "external_unspecified",
}


@dataclass
class ServerMetrics:
    finished: Counter = field(default_factory=Counter)  # finish_reason -> requests
    cached_tokens_reported: int = 0
    cached_by_tier: Counter = field(default_factory=Counter)  # tier -> tokens reported
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))

    @property
    def cached_tokens_cpu_reported(self) -> int:
        return self.cached_by_tier["cpu"]

    def request_done(self, finish_reason: str, out: RequestOutput | None, e2e_s: float) -> None:
        self.finished[finish_reason] += 1
        if out is not None:
            self.cached_tokens_reported += out.cached_tokens
            for tier in TIERS:
                self.cached_by_tier[tier] += getattr(out, f"cached_tokens_{tier}")
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
    num_gpu_blocks: int | None = None,
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
            [f"vllm:cache_config_info{{{_cache_labels(block_size, num_gpu_blocks)}}} 1.0"],
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
    lines.extend(tier_lines(stats, server, labels))
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


_TIER_COUNTERS = (  # (name, EngineStats.tiers key, help); labelled by tier (and direction)
    (
        "harness:kv_tier_blocks_moved_total",
        "blocks",
        "KV blocks moved into a tier (in) or back to the device (out).",
    ),
    (
        "harness:kv_tier_bytes_moved_total",
        "bytes",
        "KV bytes moved into a tier (in) or back to the device (out).",
    ),
)


def tier_lines(stats: EngineStats, server: ServerMetrics, labels: str) -> list[str]:
    """Per tier: hit tokens (vLLM's by-source family and ours), blocks and bytes moved, resident
    blocks, unreadable blocks and failed store calls."""
    offload = stats.tiers
    hits = {t: offload[t]["hit_tokens"] for t in offload}
    hits["device"] = stats.prefix_cache_hits - sum(hits.values())
    name = "vllm:prompt_tokens_cached_by_source_total"
    out = [
        f"# HELP {name} Prefix-cache hit tokens by the tier that supplied them.",
        f"# TYPE {name} counter",
    ]
    out += [f'{name}{{{labels},source="{VLLM_SOURCES[t]}"}} {hits.get(t, 0)}' for t in TIERS]
    name = "harness:cached_tokens_reported_by_tier_total"
    out += [
        f"# HELP {name} Sum of the per-request cached tokens reported, by tier.",
        f"# TYPE {name} counter",
    ]
    out += [f'{name}{{{labels},tier="{t}"}} {server.cached_by_tier[t]}' for t in TIERS]
    for name, key, help_ in _TIER_COUNTERS:
        out += [f"# HELP {name} {help_}", f"# TYPE {name} counter"]
        out += [
            f'{name}{{{labels},tier="{t}",direction="{d}"}} {c[f"{key}_{d}"]}'
            for t, c in offload.items()
            for d in ("in", "out")
        ]
    for name, key, kind in (
        ("harness:kv_tier_blocks", "resident_blocks", "gauge"),
        ("harness:kv_tier_corrupt_blocks_total", "corrupt", "counter"),
        ("harness:kv_tier_errors_total", "errors", "counter"),
    ):
        out += [f"# HELP {name} KV tiers: {key.replace('_', ' ')}.", f"# TYPE {name} {kind}"]
        out += [f'{name}{{{labels},tier="{t}"}} {c[key]}' for t, c in offload.items()]
    return out


def _cache_labels(block_size: int, num_gpu_blocks: int | None) -> str:
    """vLLM's labels: the block size, and the pool's blocks (what `harness probe cache` reads)."""
    blocks = "" if num_gpu_blocks is None else f',num_gpu_blocks="{num_gpu_blocks}"'
    return f'block_size="{block_size}"{blocks}'
