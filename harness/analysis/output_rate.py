"""Output tokens per second over a run, in equal time bins: the report's output-rate panel."""

from __future__ import annotations

import numpy as np


def output_rate(done: np.ndarray, tokens: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(each bin's start, its output tokens per second) of requests that ended at `done` seconds
    (from the run's first send) with `tokens` output tokens, over `bins` equal bins up to the
    last end; a request counts in the bin it ended in."""
    width = max(float(done.max()), 1e-9) / bins
    at = np.minimum((done / width).astype(int), bins - 1)
    return np.arange(bins) * width, np.bincount(at, weights=tokens, minlength=bins) / width
