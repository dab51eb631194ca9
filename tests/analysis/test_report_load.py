"""The report's load-held section draws the analyzer's window and timeline, not its own."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from harness.report.html import render_report
from harness.report.plots.load import load_held
from tests.analysis.synthetic import write_synthetic_run


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    run = write_synthetic_run(tmp_path_factory.mktemp("load") / "r", "r", n_tasks=40, seed=5)
    a = analyze(load_run(run))
    t0 = float(a.run.records["t_sent"].min())
    # a window the driver's phases would never give: only the summary can say it
    a.summary["window"].update(
        start_s=t0 + 10.0, end_s=t0 + 20.0, reason="steady: from 10 s (test window)"
    )
    return a


def _shaded(ax) -> list[tuple[float, float]]:
    spans = []
    for p in ax.patches:
        xs = p.get_path().transformed(p.get_patch_transform()).vertices[:, 0]
        spans.append((round(float(xs.min()), 6), round(float(xs.max()), 6)))
    return spans


@pytest.mark.slow
def test_every_panel_shades_exactly_the_summarys_window(analysis):
    fig = load_held([analysis])
    try:
        assert len(fig.axes) == 3
        for ax in fig.axes:
            assert _shaded(ax) == [(10.0, 20.0)]
    finally:
        plt.close(fig)


def test_the_hit_panel_draws_the_rolling_server_and_ideal_hit_rate(analysis):
    fig = load_held([analysis])
    try:
        hit = fig.axes[2]
        lines = {line.get_linestyle(): line for line in hit.get_lines()}  # the run by its colour
        assert set(lines) == {"-", "--"}
        key = [t.get_text() for t in fig.legends[0].get_texts()]  # one legend, under the panels
        assert {"server hit", "ideal hit", "tasks in flight", "target"} <= set(key)
        lines = {"r server hit": lines["-"], "r ideal hit": lines["--"]}
        tl = analysis.summary["timeline"]
        t0 = float(analysis.run.records["t_sent"].min())
        server = np.asarray(lines["r server hit"].get_ydata(), dtype=float)
        expected = np.array([np.nan if v is None else v for v in tl["hit_rate"]], dtype=float)
        np.testing.assert_allclose(server, expected)
        np.testing.assert_allclose(lines["r ideal hit"].get_xdata(), np.asarray(tl["t"]) - t0)
        assert np.nanmax(server) > 0.5  # the synthetic server hits ~90 % of its ideal
    finally:
        plt.close(fig)


@pytest.mark.slow
def test_the_report_states_the_windows_reason_under_the_figure(analysis):
    text = render_report([analysis])
    section = text[text.index("<h2>What load was held</h2>") : text.index("<h2>Sessions</h2>")]
    assert "steady: from 10 s (test window)" in section
    assert "10-20 s after the first send" in section
