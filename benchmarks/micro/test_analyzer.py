"""The analyzer on a shipped run (the quickstart fixture, 296 records with its trace): `analyze`
against the load it starts from (`load_run`), and the ideal-cache walk alone.

    .venv/bin/python -m pytest benchmarks/micro -p no:cacheprovider
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.ideal.walk import with_ideal
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze

RUN = (
    Path(__file__).resolve().parents[2] / "tests" / "analysis" / "fixtures" / "ideal" / "quickstart"
)


@pytest.mark.benchmark(group="analyzer")
def test_load_run_baseline(timed):
    timed(load_run, RUN)


@pytest.mark.benchmark(group="analyzer")
def test_ideal_walk(timed):
    run = load_run(RUN)
    timed(with_ideal, run)


@pytest.mark.benchmark(group="analyzer")
def test_analyze(timed):
    run = load_run(RUN)
    summary = timed(analyze, run).summary
    assert summary["requests_ok"] > 0
