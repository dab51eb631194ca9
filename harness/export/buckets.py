"""A histogram's buckets as Prometheus keeps them: a count per upper bound, and the sum."""

from __future__ import annotations

from bisect import bisect_left


class Buckets:
    """A histogram's counts per bucket (the last is +Inf) and its sum, as Prometheus keeps them."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def add(self, value: float, weight: int = 1) -> None:
        if value == value:  # NaN in no bucket
            self.counts[bisect_left(self.bounds, value)] += weight
            self.total += value * weight

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, count) pairs as the exposition gives them, ending with +Inf."""
        out, running = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
        return out
