"""The analyzer's ideal prefix cache: from the run folder's trace and the records in send order."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from harness.analysis.ideal.walk import with_ideal
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze_run
from harness.schema import RECORD_SCHEMA_VERSION
from harness.trace.native import write_trace
from tests.driver.helpers import sess, trace

FIXTURES = Path(__file__).parent / "fixtures" / "ideal"


@pytest.mark.parametrize("scenario", sorted(p.name for p in FIXTURES.iterdir()))
def test_equals_the_driver_computed_ideal_of_the_shipped_scenarios(scenario):
    # Each fixture is a small run of a shipped scenario's workload (simulated engine) recorded by
    # the driver before it stopped computing the ideal: its records carry that driver's value
    # (endpoint: the full-scale AgentX workload, salted, on the bundled engine).
    folder = FIXTURES / scenario
    recorded = [orjson.loads(line) for line in (folder / "records.jsonl").read_bytes().splitlines()]
    records, ideal = with_ideal(load_run(folder))
    # the engine's block (16): detected from its cached_tokens, or the manifest's when too few
    assert ideal.source == "trace" and ideal.granularity.block_size == 16, ideal.granularity
    computed = records["cached_tokens_ideal"].astype(int).tolist()
    assert computed == [r["cached_tokens_ideal"] for r in recorded]
    assert sum(computed) > 0 or scenario == "saturation"  # saturation: cold prompts by design


def tiny_run(folder: Path, *, with_trace: bool = True, ideal=None) -> Path:
    """a: 2 turns (32-token system + 10 in, 5 out; then 10 in); b: the same system, 3 in.
    Sent b:0 at 0.5, a:0 at 0.0, a:1 at 1.0 (file order is not send order)."""
    tr = trace(sess("a", [(10, 5, 0), (10, 5, 0)]), sess("b", [(3, 2, 0)]))
    folder.mkdir()
    manifest = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "run_id": "tiny",
        "status": "complete",
        "harness_version": "0",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": None,
        "block_size": 16,
        "replay": {"salt": None},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    rows = [("b:0", "b", 0, 0.5, 42.0 - 7), ("a:0", "a", 0, 0.0, 42), ("a:1", "a", 1, 1.0, 57)]
    lines = []
    for rid, sid, k, t, prompt in rows:
        lines.append(
            {
                "request_id": rid,
                "session_id": sid,
                "turn": k,
                "status": "ok",
                "phase": "measure",
                "t_sent": t,
                "t_first_token": t + 0.1,
                "t_done": t + 0.2,
                "prompt_tokens_expected": prompt,
                "prompt_tokens": prompt,
                "completion_tokens": 1,
                "cached_tokens": 0,
                "cached_tokens_ideal": ideal,
            }
        )
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    if with_trace:
        write_trace(tr, folder / "trace.jsonl")
    return folder


def test_block_size_recomputes_the_ideal(tmp_path):
    folder = tiny_run(tmp_path / "r")
    # a:0 is first (42 tokens, nothing earlier); b:0 (35) shares the 32-token system prompt;
    # a:1 (57) shares a:0's whole 42-token prompt.
    assert with_ideal(load_run(folder))[0]["cached_tokens_ideal"].tolist() == [32, 0, 32]
    assert with_ideal(load_run(folder), 8)[0]["cached_tokens_ideal"].tolist() == [32, 0, 40]
    assert with_ideal(load_run(folder), 1)[0]["cached_tokens_ideal"].tolist() == [32, 0, 42]
    assert with_ideal(load_run(folder), 64)[0]["cached_tokens_ideal"].tolist() == [0, 0, 0]
    summary = analyze_run(folder, block_size=8)
    assert summary["cache"]["ideal"] == {
        "block_size": 8,
        "computed_from": "trace",
        "miss_attribution": "exact",
    }
    assert summary["cache"]["granularity"]["source"] == "argument"
    assert summary["ideal_cache_hit_rate"] == pytest.approx(72 / 134)


def test_older_records_keep_their_ideal_without_a_trace(tmp_path):
    folder = tiny_run(tmp_path / "r", with_trace=False, ideal=7)
    records, ideal = with_ideal(load_run(folder), 8)
    assert records["cached_tokens_ideal"].tolist() == [7, 7, 7] and ideal.source == "records"
    with_trace, _ = with_ideal(load_run(tiny_run(tmp_path / "t", ideal=7)))  # recomputed
    assert with_trace["cached_tokens_ideal"].tolist() == [32, 0, 32]


def test_a_trace_that_does_not_match_the_records_is_not_used(tmp_path):
    folder = tiny_run(tmp_path / "r", ideal=5)
    lines = (folder / "records.jsonl").read_text().splitlines()
    bad = json.loads(lines[0]) | {"prompt_tokens_expected": 99}
    (folder / "records.jsonl").write_text("\n".join([json.dumps(bad), *lines[1:]]) + "\n")
    with pytest.warns(
        UserWarning,
        match=r"does not match the records \(1 prompt lengths differ, first request b:0",
    ):
        records, ideal = with_ideal(load_run(folder))
    assert records["cached_tokens_ideal"].tolist() == [5, 5, 5] and ideal.source == "records"
