"""Metric helpers against their plain definitions on random data."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.metrics import percentiles, weighted_percentiles


@pytest.mark.parametrize("seed", range(5))
def test_weighted_percentiles_equal_percentiles_of_the_repeated_samples(seed):
    rng = np.random.default_rng(seed)
    values = rng.lognormal(-3, 1, size=int(rng.integers(1, 300)))
    weights = rng.integers(0, 6, size=values.size)
    expected = percentiles(np.repeat(values, weights))
    got = weighted_percentiles(values, weights)
    assert got["count"] == expected["count"]
    for key in ("p50", "p90", "p95", "p99", "mean", "max"):
        assert (
            got[key] == pytest.approx(expected[key], rel=1e-12, abs=0)
            if expected[key] is not None
            else got[key] is None
        )


def test_percentiles_of_nothing_are_null_with_count_zero():
    assert percentiles(np.array([np.nan]))["p90"] is None
    assert weighted_percentiles(np.array([1.0]), np.array([0])) == percentiles(np.array([]))
