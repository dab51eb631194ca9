"""The terminal summary a person reads: about 15 lines under 100 columns, in the order they ask
(what ran, did it hold, latency and interactivity against the SLOs, throughput, cache hit vs
ideal with the top miss cause, warnings); `--verbose` prints every figure."""

from __future__ import annotations

import json

import pytest

from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from harness.app.cli import main
from harness.report.brief import WIDTH, brief
from harness.report.text import summary_table
from tests.analysis.test_report_screen import endpoint_run

MAX_LINES = 22  # with a warning and a caveat that wrap; the quickstart prints 20


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    run = endpoint_run(tmp_path_factory.mktemp("brief") / "r")
    (run / "scenario.yaml").write_text(
        "slos: {ttft_p90: 1ms, tpot_p50: 10s, interactivity_p90: 1}\n"
    )
    return analyze(load_run(run)).summary


def _starts(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def test_it_fits_a_screen_in_the_order_a_person_asks(summary):
    text = brief(summary)
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES and max(len(line) for line in lines) <= WIDTH, text
    order = ["run", "target", "model", "load", "held", "requests", "latency", "TTFT", "TPOT"]
    order += ["E2EL", "interactivity", "throughput", "goodput", "cache", "warning"]
    starts = [s.rstrip("s") if s == "warnings" else s for s in _starts(text)]
    assert [s for s in starts if s in order] == order, starts
    assert len(summary_table(summary).splitlines()) > len(lines)  # --verbose has the rest


def test_an_80_column_terminal_gets_lines_that_fit_it(summary):
    lines = brief(summary, width=79).splitlines()
    assert max(len(line) for line in lines) <= 79 and len(lines) <= MAX_LINES + 4


def test_a_wrapped_line_keeps_each_figure_with_its_unit():
    # the quickstart at 80 columns ended its cache line "... most cold (3.7" / "%)"
    from harness.report.brief import _wrap

    text = "cache hit  0.956 vs ideal 0.957 · 4.4 % of prompt tokens missed, most cold (3.7 %)"
    lines = _wrap(text, 79)
    assert len(lines) == 2 and lines[1].strip() == "(3.7 %)", lines
    assert all(len(line) <= 79 for line in lines)


def test_each_slo_sits_on_its_metrics_row_with_its_verdict(summary):
    rows = {line.split()[0]: line for line in brief(summary).splitlines() if line.strip()}
    assert rows["TTFT"].endswith("p90 <= 0.001 s: MISSED")
    assert rows["TPOT"].endswith("p50 <= 10 s: met")
    assert rows["interactivity"].endswith("p90 >= 1: met")
    assert "tok/s/user at p90" in rows["interactivity"]


def test_the_cache_line_names_the_largest_miss_cause(summary):
    line = next(x for x in brief(summary).splitlines() if x.startswith("cache hit"))
    miss = {k: v for k, v in summary["cache"]["miss_tokens"].items() if v}
    top = max(miss, key=lambda k: miss[k])
    assert f"vs ideal {summary['ideal_cache_hit_rate']:.3f}" in line and f"most {top}" in line


def test_warnings_are_shown_whole_up_to_three_then_counted(summary):
    long = "the measured window is short: " + "a reason that runs long " * 8
    text = brief({**summary, "warnings": [long, "two", "three", "four", "five"]})
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH  # a long one wraps under its label
    assert sum(line.startswith("warning ") for line in lines) == 3
    first = lines.index(next(x for x in lines if x.startswith("warning ")))
    assert lines[first + 1].endswith(" …") and lines[first + 2].startswith("warning ")
    assert "and 2 more warnings (--verbose)" in text
    assert brief({**summary, "warnings": []}).count("warnings   none") == 1


@pytest.mark.slow
def test_analyze_prints_the_short_summary_and_verbose_every_figure(tmp_path, capsys):
    run = endpoint_run(tmp_path / "r")
    assert main(["analyze", str(run)]) == 0
    short = capsys.readouterr().out
    assert main(["analyze", str(run), "--verbose"]) == 0
    full = capsys.readouterr().out
    assert short.strip() == brief(json.loads((run / "summary.json").read_text()))
    assert "ITL (token-weighted)" in full and "ITL (token-weighted)" not in short
