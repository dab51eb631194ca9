"""The report's first screen says what was tested and reads at a glance: target, model, API and
load named; no e-notation; the TPGS device caveat; a miss-split tile read from the summary; the
warnings in one collapsed banner; `report A B` in a file of its own."""

from __future__ import annotations

import html
import json
import re

import pandas as pd
import pytest

from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from harness.app.cli import main
from harness.app.reporting import write_report
from harness.report.headline import headline_strip, miss_parts
from harness.report.html import render_report
from harness.report.numbers import count, fmt, human
from harness.report.plots.sessions import timeline_task
from harness.report.tested import tpgs_caveat
from tests.analysis.golden import MANIFEST
from tests.analysis.synthetic import synthetic_records, write_run

E_NOTATION = re.compile(r"\d(\.\d+)?e[+-]?\d", re.I)
TESTED = {
    "kind": "openai-http",
    "model": "gemma3-270m",
    "api": "chat",
    "served_by": [{"endpoint": "http://127.0.0.1:18002", "owned_by": "vllm"}],
}


def endpoint_run(path, run_id="vllm-run", endpoints=("e1",), **manifest):
    """A synthetic run as a replay against an endpoint writes it: target, endpoints, load."""
    m = {
        **MANIFEST,
        "run_id": run_id,
        "simulated": False,
        "n_gpus": 0.001,  # TPGS in the hundreds of thousands: where e-notation used to show
        "target": TESTED,
        "endpoints": ["http://127.0.0.1:18002"],
        "replay": {"load": "closed", "concurrency": 4, "api": "chat", "max_duration": 60},
        "duration_s": 61.5,
        "trace_sha256": "ab" * 32,
        **manifest,
    }
    return write_run(path, synthetic_records(n_tasks=12, seed=5, endpoints=endpoints), m)


def above_first_section(page: str) -> str:
    head = page[page.index("<body>") : page.index("<h2>")]
    return html.unescape(re.sub(r"<[^>]+>", " ", head))


@pytest.mark.slow
def test_first_screen_names_target_model_api_and_load_with_no_e_notation(tmp_path):
    run = endpoint_run(tmp_path / "r")
    a = analyze(load_run(run))
    assert a.summary["tpgs"] > 1e5  # what format(.4g) wrote as 1.234e+05
    text = above_first_section(render_report([a]))
    assert "http://127.0.0.1:18002 (vllm)" in text and "gemma3-270m" in text
    assert "chat" in text and "closed loop, concurrency 4" in text
    assert "not reported by the server" in text  # vLLM does not say its device
    assert "did not say its device" in text
    assert E_NOTATION.search(text) is None, E_NOTATION.search(text)
    assert "k tok/s/GPU" in text or "M tok/s/GPU" in text


@pytest.mark.slow
def test_the_terminal_summary_says_what_was_tested(tmp_path):
    from harness.report.text import summary_table

    a = analyze(load_run(endpoint_run(tmp_path / "r")))
    table = summary_table(a.summary)
    assert "target:      http://127.0.0.1:18002 (vllm)" in table
    assert "load:        closed loop, concurrency 4" in table
    assert E_NOTATION.search(table) is None, E_NOTATION.search(table)


@pytest.mark.slow
def test_report_of_several_runs_leaves_each_runs_own_report_unchanged(tmp_path, capsys):
    a, b = endpoint_run(tmp_path / "a", "a"), endpoint_run(tmp_path / "b", "b")
    own = write_report([a])
    before = own.read_bytes()
    assert main(["report", str(a), str(b)]) == 0
    out = capsys.readouterr().out.strip()
    assert own.read_bytes() == before
    written = tmp_path / "compare" / "a-vs-b.html"  # where a run glob (tmp/*) matches no page
    assert out == f"wrote {written} (2 runs side by side)"
    assert 'data-tested="model"' in written.read_text()


@pytest.mark.slow
def test_alike_warnings_of_several_runs_are_one_collapsed_banner(tmp_path):
    analyses = [analyze(load_run(endpoint_run(tmp_path / n, n))) for n in ("p1", "p2", "p3")]
    for i, a in enumerate(analyses):
        a.summary["warnings"] = [
            f"{a.run.path}: stopped by max_duration with {100 + i} of the trace's requests unsent",
            "client: sends were late",
        ][: 2 if i == 0 else 1]
    page = render_report(analyses)
    assert page.count('<details class="warn"') == 1 and 'class="warn"' not in page.replace(
        '<details class="warn"', ""
    )
    banner = page[page.index('<details class="warn"') : page.index("</details>")]
    assert 'data-warnings="4"' in banner and "(and 1 more kind)" in banner
    assert (
        "stopped by max_duration with 100 of the trace&#39;s requests unsent and 2 alike" in banner
    )
    assert str(tmp_path) not in banner  # the run path said once, by the run's name


def test_tpgs_caveat_names_the_device_and_the_cached_share():
    s = {"n_gpus": 1.0, "tpgs": 100.0, "tpgs_parts": {"cached": 93.0}}
    on = lambda device: tpgs_caveat({**s, "tested": {"device": device}})  # noqa: E731
    assert on({"name": "cpu", "gpu": False}) == (
        "TPGS on 1 CPU (not a GPU); 93.0 % of it cached prompt tokens"
    )
    assert on({"name": "NVIDIA H200", "gpu": True}).startswith("TPGS on 1 GPU (NVIDIA H200)")
    assert "simulated device (cost model of cpu): modelled" in on(
        {"name": "simulated (cost model of cpu)", "gpu": False}
    )
    assert "did not say its device" in on({"name": None})


def test_the_miss_tile_reads_whatever_categories_the_summary_has():
    miss = {"cold": 10.0, "server_rule": {"last_block": 30.0, "granularity": 0}, "unexplained": 5}
    assert miss_parts(miss) == [
        ("cold", "cold", 10.0),
        ("last_block", "server rule last block", 30.0),
        ("unexplained", "unexplained", 5.0),
    ]


@pytest.mark.slow
def test_the_miss_tile_is_on_the_first_screen(tmp_path):
    a = analyze(load_run(endpoint_run(tmp_path / "r")))
    a.summary["cache"]["miss_tokens"] = {"cold": 100.0, "server_rule": 50.0}
    a.summary["cache"]["prompt_tokens"] = 1000.0
    strip = headline_strip([a])
    tile = strip[strip.index('data-metric="misses"') :]
    assert (
        '15.0 %<span class="unit">missed</span>' in tile
        and "cold 10.0 %" in tile
        and "server rule 5.0 %" in tile
    )
    assert "shares of all prompt tokens" in tile


def test_the_swim_lane_shows_a_task_with_subagents():
    tasks = pd.DataFrame(
        {
            "task": ["long-alone", "forked", "short"],
            "complete": [True, True, True],
            "completion_s": [90.0, 40.0, 5.0],
            "sessions": [1, 4, 1],
        }
    )
    task, why = timeline_task(tasks)
    assert task == "forked" and "with subagents (4 sessions" in why
    task, why = timeline_task(tasks[tasks["sessions"] == 1])
    assert task == "long-alone" and "no task had subagents" in why


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (32140.0, "32.1k"),
        (1_234_567, "1.23M"),
        (1402.2, "1402"),
        (228.53, "228.5"),
        (0.00894, "0.00894"),
        (0.0000123, "0.0000123"),
        (None, "-"),
        (float("nan"), "-"),
    ],
)
def test_numbers_never_use_e_notation(value, text):
    assert fmt(value) == text
    assert E_NOTATION.search(human(value if value is not None else 0.0)) is None


def test_a_value_a_tool_wrote_as_text_is_shown_as_it_is():
    assert fmt("inf", "g") == "inf"


def test_counts_are_exact_below_ten_thousand():
    assert (count(9876), count(23145), count(None)) == ("9876", "23.1k", "-")


def test_summary_json_says_what_was_tested(tmp_path):
    summary = analyze(load_run(endpoint_run(tmp_path / "r"))).summary
    json.dumps(summary)
    t = summary["tested"]
    assert t["target"] == "http://127.0.0.1:18002" and t["served_by"] == "vllm"
    assert t["load"]["mode"] == "closed" and t["load"]["concurrency"] == 4
    assert t["device"] == {"name": None, "gpu": None, "source": None}


LONG = "sweep-point-concurrency-64-against-vllm-cpu-gemma-2026-12-01T23-59"
URL = "http://gateway.inference.internal.example:18002/v1"


def _figures(analyses):
    from harness.report.plots.cache import cache_by_group, cache_by_turn, miss_categories
    from harness.report.plots.latency import interactivity, latency_cdf
    from harness.report.plots.load import load_held

    return [
        latency_cdf(analyses, "ttft", "TTFT"),
        interactivity(analyses),
        cache_by_turn(analyses),
        cache_by_group(analyses),
        miss_categories(analyses),
        load_held(analyses),
    ]


@pytest.mark.slow
def test_no_figure_text_is_clipped_with_long_run_names_and_endpoints(tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    runs = [endpoint_run(tmp_path / f"r{i}", f"{LONG}-{i}", endpoints=(URL,)) for i in (1, 2)]
    for analyses in ([analyze(load_run(runs[0]))], [analyze(load_run(r)) for r in runs]):
        for fig in _figures(analyses):
            FigureCanvasAgg(fig).draw()  # constrained layout places the text as it draws
            box = fig.bbox
            texts = [fig._suptitle] + [
                t for ax in fig.axes for t in (ax.xaxis.label, ax.title, *ax.get_yticklabels())
            ]
            for text in (t for t in texts if t is not None and t.get_text()):
                extent = text.get_window_extent()
                assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, text.get_text()
            plt.close(fig)


@pytest.mark.slow
def test_legends_sit_outside_the_data_and_name_each_run_once(tmp_path):
    import matplotlib.pyplot as plt

    runs = [endpoint_run(tmp_path / n, n) for n in ("alpha", "beta")]
    for analyses in ([analyze(load_run(runs[0]))], [analyze(load_run(r)) for r in runs]):
        for fig in _figures(analyses):
            assert all(ax.get_legend() is None for ax in fig.axes)  # none inside an axes
            entries = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
            for a in analyses:
                named = sum(a.run.name in e for e in entries)
                assert named <= (0 if len(analyses) == 1 else 1), entries
            plt.close(fig)
