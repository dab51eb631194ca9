"""The server's prefix-cache granularity: the block size its cache hits come in.

A server caches whole KV blocks, so every `cached_tokens` it reports is a multiple of its block
size (vLLM's CPU build: 128; its GPU default: 16; the reference engine: its `block_size`). The
ideal must be counted in the same blocks, or a server that hits everything it can looks like it
lost the difference. Two witnesses (docs/metrics.md, "Cache granularity"):

- the records: the largest candidate (powers of two up to 1024, plus the trace's and the run's
  configured block) that divides every non-zero `cached_tokens`, trusted from MIN_SAMPLES
  non-zero values on (with N values at granularity g, the chance they all happen to be multiples
  of 2g is about 2^-N);
- `/metrics`: the `block_size` label of `vllm:cache_config_info`, scraped into the manifest.

Choice, in order: `--block-size`; `/metrics` when the records agree with it (their block is a
multiple of it) or are too few; the records' block when they contradict `/metrics` or there is
no `/metrics` value; else the run's configured block (manifest), the trace's, 16.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from harness.errors import InputError

MIN_SAMPLES = 16
CANDIDATES = tuple(2**i for i in range(11))  # 1 .. 1024
DEFAULT_BLOCK_SIZE = 16


@dataclass(frozen=True)
class Granularity:
    block_size: int  # what the ideal is computed at
    source: str  # "argument" | "metrics" | "records" | "manifest" | "trace" | "default"
    reason: str
    from_records: int | None  # detected from cached_tokens (None: too few non-zero values)
    nonzero_samples: int  # non-zero cached_tokens the detection saw
    from_metrics: int | None  # /metrics vllm:cache_config_info block_size

    def as_dict(self) -> dict:
        return {**asdict(self), "min_samples": MIN_SAMPLES}


def from_records(cached: np.ndarray, extra: tuple[int, ...] = ()) -> tuple[int | None, int]:
    """(largest candidate dividing every non-zero value or None when too few, how many)."""
    values = cached[~np.isnan(cached)]
    values = values[values > 0].astype(np.int64)
    if len(values) < MIN_SAMPLES:
        return None, len(values)
    candidates = sorted({*CANDIDATES, *(e for e in extra if e and e > 0)}, reverse=True)
    return next(c for c in candidates if not (values % c).any()), len(values)


def from_metrics(scraped) -> int | None:
    """The one `cache_block_size` found anywhere in the manifest's `server_metrics` snapshots."""
    sizes: set[int] = set()
    stack = [scraped]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            value = item.get("cache_block_size")
            if isinstance(value, int) and value > 0:
                sizes.add(value)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return sizes.pop() if len(sizes) == 1 else None


def decide(
    cached: np.ndarray, manifest: dict, trace_block: int | None, argument: int | None
) -> Granularity:
    configured = manifest.get("block_size") if isinstance(manifest.get("block_size"), int) else None
    records, n = from_records(cached, tuple(b for b in (trace_block, configured) if b))
    metrics = from_metrics(manifest.get("server_metrics"))
    seen = f"{n} non-zero cached_tokens"
    if argument is not None:
        if argument <= 0:
            raise InputError(
                f"must be a positive number of tokens, got {argument}", field="--block-size"
            )
        return Granularity(argument, "argument", "--block-size", records, n, metrics)
    if metrics is not None and (records is None or records % metrics == 0):
        why = (
            f"/metrics block_size {metrics}; the {seen} are multiples of it"
            if records is not None
            else f"/metrics block_size {metrics} ({seen}: too few to check, need {MIN_SAMPLES})"
        )
        return Granularity(metrics, "metrics", why, records, n, metrics)
    if records is not None:
        why = f"the largest block dividing all {seen}"
        if metrics is not None:
            why += f" (/metrics says {metrics}, which they are not all multiples of)"
        return Granularity(records, "records", why, records, n, metrics)
    fallback = f"not detected ({seen}, need {MIN_SAMPLES}; no /metrics block_size)"
    if configured:
        return Granularity(
            configured, "manifest", f"{fallback}: the run's configured block", None, n, metrics
        )
    if trace_block:
        return Granularity(trace_block, "trace", f"{fallback}: the trace's block", None, n, metrics)
    return Granularity(DEFAULT_BLOCK_SIZE, "default", fallback, None, n, metrics)
