"""Speculative-decoding figures end to end: `harness replay` against a real loopback server that
drafts and accepts a known number of tokens per step and serves vLLM's (or SGLang's) counters on
/metrics; the figures in summary.json, the report's table, the terminal line and compare's rows,
each checked against what the server counted; and compare's gate on an invalid run."""

import asyncio
import json
import sys
from asyncio.subprocess import PIPE

import pytest

from harness.analysis.compare.verdict import compare_runs
from harness.app.reporting import write_report
from harness.prometheus import spec_decode
from harness.report.text import summary_table
from harness.trace.native import write_trace
from tests.driver.helpers import sess, trace
from tests.driver.sse_server import ServerConfig, SSETestServer

# 3 sessions x 2 turns, 9 output tokens each: after the prefill's token, 8 come from verify steps.
# Drafting 4 and accepting 2 a step: steps of 3, 3 and 2 tokens (the last accepts 1) -> per request
# 3 drafts, 12 drafted tokens, 5 accepted; positions 0, 1 accepted in 3 and 2 of the 3 steps.
SESSIONS = [sess(f"s{i}", [(8, 9, 0.0), (8, 9, 0.0)]) for i in range(3)]
REQUESTS = 6


async def _replay(tmp_path, name: str, *extra: str, **server_cfg) -> tuple[dict, SSETestServer]:
    server = SSETestServer(ServerConfig(**server_cfg))
    await server.start()
    try:
        path = tmp_path / "trace.jsonl"
        write_trace(trace(*SESSIONS), path)
        run = tmp_path / name
        args = ["replay", path, "--endpoint", server.url, "--model", "m", "-o", run, *extra]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "harness", *map(str, args), stdout=PIPE, stderr=PIPE
        )
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
    finally:
        await server.stop()
    from harness.analysis.summary import analyze_run

    return analyze_run(run), server


@pytest.mark.slow
async def test_vllm_counters_give_acceptance_and_mean_accepted_length(tmp_path):
    summary, server = await _replay(tmp_path, "spec", spec_tokens=4, spec_accepted=2)
    spec = summary["speculative_decoding"]
    assert server.spec.drafts == 3 * REQUESTS  # the preflight's 1-token probe drafted nothing
    assert spec["source"] == "vllm counters" and spec["endpoints_scraped"] == 1
    assert (spec["drafts"], spec["draft_tokens"], spec["accepted_tokens"]) == (18, 72, 30)
    assert spec["acceptance_rate"] == pytest.approx(30 / 72)
    assert spec["mean_accepted_length"] == pytest.approx(1 + 30 / 18)
    assert spec["acceptance_by_position"] == pytest.approx([1.0, 2 / 3, 0.0, 0.0])
    line = next(x for x in summary_table(summary).splitlines() if x.startswith("speculative"))
    assert "acceptance 0.417 (30 of 72 drafted tokens)" in line and "2.667" in line
    page = write_report([tmp_path / "spec"]).read_text()
    assert "data-spec-decode" in page and "<td>0.417</td>" in page


@pytest.mark.slow
async def test_compare_judges_acceptance_by_the_rule_of_every_row(tmp_path):
    for name, accepted in (("base", 2), ("base2", 2), ("worse", 0), ("worse2", 0)):
        await _replay(tmp_path, name, spec_tokens=4, spec_accepted=accepted)
    gate = "spec_acceptance_rate:-10%"
    one = compare_runs(tmp_path / "base", tmp_path / "worse", fail_on=gate)
    row = next(r for r in one.rows if r.key == "spec_acceptance_rate")
    assert (row.baseline, row.run) == (pytest.approx(30 / 72), 0.0)
    assert row.verdict == "inconclusive" and row.band_source == "one run: within-run only"
    assert one.exit_code == 4 and one.failures == []  # one run a side: never regressed
    two = compare_runs(
        [tmp_path / "base", tmp_path / "base2"],
        [tmp_path / "worse", tmp_path / "worse2"],
        fail_on=gate,
    )
    row = next(r for r in two.rows if r.key == "spec_acceptance_rate")
    assert row.verdict == "regressed" and row.band_source == "between 2+2 runs"
    assert two.exit_code == 1 and "spec_acceptance_rate" in two.failures[0]


@pytest.mark.slow
async def test_no_spec_rows_without_speculation_and_the_gate_fails_an_invalid_run(tmp_path):
    await _replay(tmp_path, "fits")
    # the same trace at a limit its second turns do not fit: 3 of 6 requests skipped
    await _replay(tmp_path, "tight", "--context-overflow", "skip", max_model_len=60)
    tight = json.loads((tmp_path / "tight" / "summary.json").read_text())
    assert tight["context_limit"]["skipped"] == 3 and not tight["validity"]["valid"]
    quiet = compare_runs(tmp_path / "fits", tmp_path / "tight")
    assert not any(r.key.startswith("spec_") for r in quiet.rows)
    assert quiet.exit_code != 1 and any("tight is INVALID" in n for n in quiet.notes)
    gate = compare_runs(tmp_path / "fits", tmp_path / "tight", fail_on="ttft_p90:+1000%")
    assert gate.exit_code == 1 and "tight is INVALID: 3 of 6" in gate.failures[-1]
    page = write_report([tmp_path / "tight"]).read_text()
    assert 'data-invalid="tight"' in page and "data-spec-decode" not in page


@pytest.mark.slow
async def test_sglang_gauges_are_reported_as_the_last_batch(tmp_path):
    summary, _ = await _replay(
        tmp_path, "sgl", spec_tokens=4, spec_accepted=2, metrics_flavor="sglang"
    )
    spec = summary["speculative_decoding"]
    assert spec["source"] == "sglang gauges" and "acceptance_rate" not in spec
    assert spec["last_batch_accept_rate"] == pytest.approx(5 / 12)
    assert spec["last_batch_accept_length"] == pytest.approx(1 + 5 / 3)
    assert "last batch" in summary_table(summary)


def test_the_exposition_as_vllm_writes_it():
    text = (
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="g"} 10.0\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="g"} 40.0\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="g"} 12.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="g",position="1"} 4.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="g",position="0"} 8.0\n'
        'vllm:spec_decode_num_accepted_tokens_created{engine="0",model_name="g"} 1.7e9\n'
    )
    assert spec_decode(text) == {
        "spec_decode_num_drafts": 10.0,
        "spec_decode_num_draft_tokens": 40.0,
        "spec_decode_num_accepted_tokens": 12.0,
        "spec_decode_accepted_per_pos": [8.0, 4.0],
    }
    assert spec_decode('vllm:prefix_cache_hits_total{engine="0"} 3.0\n') == {}


# Replies of 9 and 5 tokens: 3 drafts, 12 drafted, 5 accepted; 2 drafts, 8 drafted, 2 accepted.
MIXED = [sess(f"m{i}", [(8, 9, 0.0), (8, 5, 0.0)]) for i in range(3)]


@pytest.mark.slow
async def test_per_request_counts_reach_records_summary_and_report(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "SESSIONS", MIXED)
    summary, server = await _replay(
        tmp_path, "per", spec_tokens=4, spec_accepted=2, spec_per_request=True
    )
    lines = (tmp_path / "per" / "records.jsonl").read_text().splitlines()
    records = sorted(map(json.loads, lines), key=lambda r: r["output_tokens_expected"])
    counts = [
        (r["spec_drafts"], r["spec_draft_tokens"], r["spec_accepted_tokens"]) for r in records
    ]
    assert counts == [(2, 8, 2)] * 3 + [(3, 12, 5)] * 3
    spec = summary["speculative_decoding"]
    per = spec["per_request"]
    assert per["requests_reporting"] == 6
    assert (per["drafts"], per["draft_tokens"], per["accepted_tokens"]) == (15, 60, 21)
    # the usage chunks add up to what /metrics counted over the run
    assert (spec["drafts"], spec["draft_tokens"], spec["accepted_tokens"]) == (15, 60, 21)
    assert (server.spec.drafts, server.spec.accepted) == (15, 21)
    assert per["acceptance_rate"] == pytest.approx(21 / 60)
    each = per["request_acceptance"]
    assert each["count"] == 6
    assert each["p50"] == pytest.approx((0.25 + 5 / 12) / 2) and each["p90"] == pytest.approx(
        5 / 12
    )
    line = next(x for x in summary_table(summary).splitlines() if "per request" in x)
    assert "(6 reporting)" in line and "acceptance 0.350 (21 of 60" in line
    assert "p50 0.333 p90 0.417 (n=6)" in line
    page = write_report([tmp_path / "per"]).read_text()
    assert "<td>0.333 / 0.417 (6)</td>" in page


@pytest.mark.slow
async def test_no_per_request_counts_without_the_servers_form(tmp_path):
    summary, _ = await _replay(tmp_path, "plain", spec_tokens=4, spec_accepted=2)
    assert summary["speculative_decoding"]["per_request"] is None
    rec = json.loads((tmp_path / "plain" / "records.jsonl").read_text().splitlines()[0])
    assert rec["spec_drafts"] is rec["spec_draft_tokens"] is rec["spec_accepted_tokens"] is None


def test_a_per_request_form_with_a_count_missing_or_not_whole_is_not_recorded():
    from harness.driver.apis.openai.decode import spec_counts

    good = {"num_spec_steps": 4, "num_draft_tokens": 11, "num_accepted_draft_tokens": 8}
    assert spec_counts(good) is not None and spec_counts(good).accepted_tokens == 8
    assert spec_counts({**good, "num_draft_tokens": 11.0}) is None
    assert spec_counts({**good, "num_spec_steps": -1}) is None
    assert spec_counts({"num_spec_steps": 4}) is None and spec_counts(None) is None


@pytest.mark.slow
async def test_without_counters_the_per_request_sums_stand_in(tmp_path):
    kw = {"spec_tokens": 4, "spec_accepted": 2, "spec_per_request": True}
    summary, _ = await _replay(tmp_path, "a", "--no-scrape-metrics", **kw)
    spec = summary["speculative_decoding"]
    assert spec["source"] == "per-request usage" and "drafts" not in spec
    assert spec["per_request"]["acceptance_rate"] == pytest.approx(30 / 72)
    assert any("no /metrics counters scraped" in x for x in summary_table(summary).splitlines())
    await _replay(tmp_path, "b", "--no-scrape-metrics", **{**kw, "spec_accepted": 0})
    result = compare_runs(tmp_path / "a", tmp_path / "b")
    row = next(r for r in result.rows if r.key == "spec_acceptance_rate")
    assert (row.baseline, row.run) == (pytest.approx(30 / 72), 0.0)
