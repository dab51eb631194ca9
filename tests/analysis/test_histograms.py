"""HDR histograms: written to the run folder, and merging agrees with the pooled data."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.histograms import (
    hdr_percentiles,
    histogram_of,
    merge_histograms,
    new_histogram,
    read_histograms,
    write_histograms,
)
from harness.analysis.summary import analyze_run
from tests.analysis.synthetic import write_synthetic_run


def test_merge_equals_pooled_within_hdr_precision(tmp_path):
    rng = np.random.default_rng(7)
    parts = [rng.lognormal(-1.5, 0.8, size=5000) for _ in range(3)]
    for i, values in enumerate(parts):
        write_histograms({"ttft": histogram_of(values)}, _dir(tmp_path / f"w{i}"))
    merged = merge_histograms(read_histograms(tmp_path / f"w{i}") for i in range(3))["ttft"]
    pooled = np.concatenate(parts)
    assert merged.get_total_count() == pooled.size
    assert merged.equals(
        histogram_of(pooled)
    )  # merging loses nothing against recording pooled data
    got = hdr_percentiles(merged)
    for q in (50, 90, 95, 99):
        exact = np.percentile(pooled, q, method="inverted_cdf")  # HDR reports a recorded value
        assert got[f"p{q}"] == pytest.approx(exact, rel=2e-3, abs=1e-6)


def test_bucketed_recording_equals_recording_every_value():
    values = np.random.default_rng(1).lognormal(-2, 2, size=3000)
    naive = new_histogram()
    for v in np.clip(np.rint(values * 1e6), 1, None).astype(int).tolist():
        naive.record_value(v)
    fast = histogram_of(values)
    assert fast.equals(naive)
    assert hdr_percentiles(fast) == hdr_percentiles(naive)


@pytest.mark.slow
def test_token_weighted_itl_histogram_matches_the_summary(tmp_path):
    run = write_synthetic_run(tmp_path / "run", "run", n_tasks=50, seed=3)
    summary = analyze_run(run)
    itl = read_histograms(run)["itl"]
    assert itl.get_total_count() == summary["itl_s"]["count"]
    assert hdr_percentiles(itl)["p90"] == pytest.approx(summary["itl_s"]["p90"], rel=5e-3)


def _dir(path):
    path.mkdir(parents=True)
    return path
