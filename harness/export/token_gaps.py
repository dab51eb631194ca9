"""The inter-token latency histogram, folded in batches: the only per-chunk work of the live
metrics. A finished reply's chunk lists are kept (a reference, no copy) and folded with numpy
`BATCH` replies at a time, or when a scrape reads the histogram: ~0.05 µs a chunk, where a
Python loop per chunk cost ~0.3 µs (benchmarks/bench_driver.py --metrics; docs/export.md).
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from harness.export.buckets import Buckets

BATCH = 256  # replies kept before they are folded (their chunk lists, a few hundred KB at most)


class TokenGaps:
    """Each gap between two chunks that carried tokens, over the later one's tokens, counted once
    per token (analysis.metrics.itl_of); one token a chunk where the server gave no counts."""

    __slots__ = ("buckets", "pending")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.buckets = Buckets(bounds)
        self.pending: list[tuple[list[float], list[int] | None]] = []

    def add(self, times: list[float], tokens: list[int]) -> None:
        if len(times) > 1:
            self.pending.append((times, tokens if len(tokens) == len(times) else None))
            if len(self.pending) >= BATCH:
                self.fold()

    def fold(self) -> None:
        """The kept replies into the buckets."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        lengths = np.fromiter((len(t) for t, _ in pending), dtype=np.int64, count=len(pending))
        times = np.fromiter(chain.from_iterable(t for t, _ in pending), dtype=float)
        tokens = np.fromiter(
            chain.from_iterable(c if c is not None else [1] * len(t) for t, c in pending),
            dtype=float,
        )
        owner = np.repeat(np.arange(len(pending)), lengths)
        keep = tokens > 0  # a chunk without tokens carries no gap
        times, tokens, owner = times[keep], tokens[keep], owner[keep]
        later = np.zeros(times.size, dtype=bool)
        later[1:] = owner[1:] == owner[:-1]
        gaps = np.diff(times, prepend=0.0)[later]
        weights = tokens[later]
        b = self.buckets
        at = np.searchsorted(b.bounds, gaps / weights, side="left")  # as bisect_left
        added = np.bincount(at, weights=weights, minlength=len(b.counts))
        for i in np.flatnonzero(added):
            b.counts[i] += int(added[i])
        b.total += float(gaps.sum())  # each gap over n tokens, n times: the gaps' sum
