"""`analyze` is a pure function of a `Run`: a Run built by hand (a notebook's path) gives the same
summary as `load_run`'s, and analyzing leaves the Run as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.loader import Run, load_run
from harness.analysis.records import read_records
from harness.analysis.summary import analyze
from harness.trace.native import read_trace

QUICKSTART = Path(__file__).parent / "fixtures" / "ideal" / "quickstart"


def hand_built(folder: Path) -> Run:
    records, _ = read_records(folder / "records.jsonl")
    records["cached_tokens_ideal"] = float("nan")  # as today's driver writes it: the analyzer's job
    manifest = json.loads((folder / "manifest.json").read_text())
    return Run(folder, records, manifest, trace=read_trace(folder / "trace.jsonl"))


@pytest.mark.slow
def test_a_hand_built_run_gives_the_loaded_runs_summary():
    loaded = analyze(load_run(QUICKSTART)).summary
    by_hand = analyze(hand_built(QUICKSTART)).summary
    assert by_hand == loaded
    assert by_hand["ideal_cache_hit_rate"] == pytest.approx(0.96, abs=0.01)
    assert by_hand["cache"]["ideal"]["miss_attribution"] == "exact"


@pytest.mark.slow
def test_analyze_leaves_its_run_as_it_was():
    run = load_run(QUICKSTART)
    before = run.records.copy()
    first = analyze(run, window_mode="steady", block_size=8).summary
    pd.testing.assert_frame_equal(run.records, before)
    assert "ideal_shared_tokens" not in run.records and "task" not in run.records
    assert analyze(run, window_mode="steady", block_size=8).summary == first
    assert analyze(run).summary != first  # the arguments, not leftovers, decide the figures
