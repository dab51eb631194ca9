"""Axes that follow the data and labels that say what differs: a far cluster of tiny TPOTs does not
stretch the axis, tick labels keep their step's decimals, an all-zero trend has no offset label;
outcome rows are never marked as configuration differences; a trend's series are named by what
sets them apart."""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.analysis.compare.series_names import series_names
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from harness.report import tested
from harness.report.plots.axes import StepFormatter, honest_ylim, log_span
from harness.report.sweep import render_sweep
from tests.analysis.test_report_screen import E_NOTATION, endpoint_run


def test_a_far_cluster_of_tiny_values_does_not_stretch_a_log_axis():
    """1.5 % of TPOTs at 1e-5 s (a reply whose tokens came in one read), the rest 5-200 ms."""
    rng = np.random.default_rng(1)
    values = np.concatenate([np.full(15, 1e-5), rng.uniform(0.005, 0.2, 985)])
    span = log_span(values, (0.01, 0.999), (0.1, 0.99))
    assert span is not None and 0.001 < span.lo < 0.006 and span.hi <= 0.2
    assert span.below == 15 and span.note() == "not drawn: 1.5 % of requests below"
    whole = log_span(rng.uniform(0.005, 0.2, 1000))  # nothing far: the data's own extent
    assert whole is not None and whole.below == whole.above == 0 and whole.note() == ""


def test_tick_labels_keep_the_decimals_of_their_step():
    fmt = StepFormatter()
    assert fmt.format_ticks([20000, 20250, 20500, 20750]) == [
        "20.00k",
        "20.25k",
        "20.50k",
        "20.75k",
    ]
    assert fmt.format_ticks([12, 14, 16]) == ["12", "14", "16"]
    assert fmt.format_ticks([0.925, 0.95, 0.975, 1.0]) == ["0.925", "0.950", "0.975", "1.000"]
    assert fmt.format_ticks([0, 1_000_000, 2_000_000]) == ["0", "1M", "2M"]


def test_an_all_zero_trend_panel_has_no_offset_label():
    fig = Figure(figsize=(6, 2), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1, 2], [0.0, 0.0, 0.0])
    honest_ylim(ax, [0.0, 0.0, 0.0])
    ax.yaxis.set_major_formatter(StepFormatter())
    FigureCanvasAgg(fig).draw()
    assert ax.get_ylim() == (0, 1) and ax.yaxis.get_offset_text().get_text() == ""
    assert all(E_NOTATION.search(t.get_text()) is None for t in ax.get_yticklabels())


def test_outcome_rows_are_never_marked_as_configuration_differences(tmp_path):
    a = analyze(load_run(endpoint_run(tmp_path / "a", "a"))).summary
    b = {**a, "sessions": {**a["sessions"], "tasks": a["sessions"]["tasks"] + 5}}
    b["tested"] = {**a["tested"], "duration_s": 90.7}  # the same setup, another outcome
    page = str(tested.tested_html([("a", a), ("b", b)]))
    assert "class=differ" not in page and page.count("class=outcome") == 2
    b["tested"] = {**b["tested"], "model": "another-model"}
    page = str(tested.tested_html([("a", a), ("b", b)]))
    assert page.count("class=differ") == 1 and 'class=differ data-tested="model"' in page


def test_trend_series_are_named_by_what_sets_them_apart(tmp_path):
    loads = {"a": 6, "b": 6, "c": 3}
    runs = [
        analyze(
            load_run(endpoint_run(tmp_path / n, n, replay={"load": "closed", "concurrency": c}))
        )
        for n, c in loads.items()
    ]
    assert series_names(runs, [0, 0, 1]) == ["concurrency 6", "concurrency 3"]
    assert series_names(runs[:1], [0]) == ["closed loop, concurrency 6"]


def test_the_sweep_table_writes_numbers_as_the_terminal_does():
    row = {
        "point": "routing=session_sticky", "requests_per_s": 26.1, "total_tokens_per_s": 29800.0,
        "tpgs": 9940.0, "interactivity_p90": 27.6, "ttft_p90_s": 0.0805, "cache_hit_rate": 0.959,
        "ideal_cache_hit_rate": 0.959, "tasks_in_flight_mean": 8.97,
    }  # fmt: skip
    table = render_sweep({"points": [row], "frontier": [row["point"]]})
    assert "29.8k" in table and E_NOTATION.search(table) is None
