"""One label set's live figures: counters and histograms, folded from each finished record.

Only plain arithmetic per record (a bisect per value); the inter-token latencies, one per chunk,
are folded in batches (`token_gaps.py`). The scrape (another thread) copies the numbers under the
run's lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.export import catalog
from harness.export.buckets import Buckets
from harness.export.token_gaps import TokenGaps


class Series:
    """The figures of one (endpoint, call kind, phase) of a run."""

    __slots__ = (
        "status",
        "errors",
        "prompt",
        "cached",
        "cache_base",
        "output",
        "usage_in",
        "usage_out",
        "duration",
        "ttft",
        "tpot",
        "itl",
    )

    def __init__(self) -> None:
        self.status: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.prompt = self.cached = self.cache_base = self.output = 0
        self.usage_in = Buckets(catalog.TOKEN_BUCKETS)
        self.usage_out = Buckets(catalog.TOKEN_BUCKETS)
        self.duration = Buckets(catalog.LATENCY_BUCKETS)
        self.ttft = Buckets(catalog.LATENCY_BUCKETS)
        self.tpot = Buckets(catalog.TOKEN_TIME_BUCKETS)
        self.itl = TokenGaps(catalog.TOKEN_TIME_BUCKETS)

    def fold(self, rec: Mapping[str, Any]) -> None:
        """One ended request: its status and failure class; tokens and latencies when ok (the
        requests summary.json's figures are computed from)."""
        status = rec["status"]
        self.status[status] = self.status.get(status, 0) + 1
        error = rec["error"]
        if error is not None and status != "cancelled":
            self.errors[error["class"]] = self.errors.get(error["class"], 0) + 1
        if status == "ok":
            self._tokens(rec)
            self._latencies(rec)

    def _tokens(self, rec: Mapping[str, Any]) -> None:
        prompt = rec["prompt_tokens"]
        if prompt is None:
            prompt = rec["prompt_tokens_expected"] or 0
        output = rec["completion_tokens"]
        if output is None:
            output = sum(rec["chunk_tokens"])
        self.prompt += prompt
        cached = rec["cached_tokens"]
        if cached is not None:  # the hit ratio is over the requests whose server said
            self.cached += cached
            self.cache_base += prompt
        self.output += output
        self.usage_in.add(prompt)
        self.usage_out.add(output)

    def _latencies(self, rec: Mapping[str, Any]) -> None:
        t_sent, t_first = rec["t_sent"], rec["t_first_token"]
        if t_sent is None:
            return
        self.duration.add(rec["t_done"] - t_sent)
        if t_first is None:
            return
        self.ttft.add(t_first - t_sent)
        tokens = rec["completion_tokens"]
        if tokens is None:
            tokens = sum(rec["chunk_tokens"])
        if tokens >= 2:
            self.tpot.add((rec["t_last_token"] - t_first) / (tokens - 1))
        self.itl.add(rec["chunk_times"], rec["chunk_tokens"])
