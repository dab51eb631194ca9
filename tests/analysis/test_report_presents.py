"""The report presents the analysis's figures; it computes none of its own (a second definition
could disagree with the tables beside it)."""

from __future__ import annotations

import numpy as np

from harness.analysis.loader import load_run
from harness.analysis.output_rate import output_rate
from harness.analysis.summary import analyze
from harness.report.plots.latency import latency_cdf
from tests.analysis.test_report_screen import endpoint_run


def test_a_cdfs_percentile_dots_are_the_analysis_figures(tmp_path):
    a = analyze(load_run(endpoint_run(tmp_path / "run")))
    a.summary["ttft_s"].update(p50=0.0123, p90=0.0456, p99=None)  # marked as the analysis says
    fig = latency_cdf([a], "ttft", "TTFT")
    dots = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]
    assert [(float(d.get_xdata()[0]), float(d.get_ydata()[0])) for d in dots] == [
        (0.0123, 0.5),
        (0.0456, 0.9),
    ]
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert "p50 0.0123 s" in notes and "p90 0.0456 s" in notes


def test_the_output_rate_counts_each_request_in_the_bin_it_ended_in():
    done = np.array([0.5, 1.5, 1.9, 4.0])  # the last end closes the last bin
    starts, rate = output_rate(done, np.array([10.0, 4.0, 6.0, 8.0]), bins=4)
    assert starts.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert rate.tolist() == [10.0, 10.0, 0.0, 8.0]  # tokens per second of a 1-s bin
