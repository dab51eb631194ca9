"""Every metric of the golden run (tests/analysis/golden.py), computed by hand here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.analysis.loader import load_run
from harness.analysis.slo import parse_slos
from harness.analysis.summary import analyze, analyze_run
from tests.analysis.golden import GOLDEN_TRACE, write_run

APPROX = {"rel": 1e-9, "abs": 1e-12}


def pct(values, q):
    # numpy's default linear interpolation, written out: rank (n-1)q/100 between neighbours.
    v = sorted(values)
    rank = (len(v) - 1) * q / 100
    lo = int(rank)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (rank - lo)


@pytest.fixture
def golden(tmp_path):
    return analyze(
        load_run(write_run(tmp_path / "golden")), slos=parse_slos(["ttft_p90=0.6s", "tpot=300ms"])
    )


def test_counts_exclude_warmup_and_cooldown_and_name_failures(golden):
    s = golden.summary
    assert (s["requests_total"], s["requests_ok"], s["requests_failed"]) == (6, 5, 1)
    assert s["requests_excluded"] == {"warmup": 1, "cooldown": 1}
    assert s["errors_by_class"] == {"TimeoutError": 1}
    assert s["simulated"] is True


def test_ttft_and_e2el_percentiles(golden):
    ttft = [0.5, 0.8, 0.3, 0.4, 0.2]  # m1-0, m3-0, s1-0, m1-1, m1-2
    s = golden.summary["ttft_s"]
    assert s["count"] == 5
    assert s["p50"] == pytest.approx(0.4, **APPROX)
    assert s["p90"] == pytest.approx(0.5 + 0.6 * 0.3, **APPROX)  # rank 3.6 between 0.5 and 0.8
    assert s["p99"] == pytest.approx(pct(ttft, 99), **APPROX)
    assert s["mean"] == pytest.approx(0.44, **APPROX)
    assert s["max"] == pytest.approx(0.8, **APPROX)
    e2el = golden.summary["e2el_s"]
    assert e2el["p90"] == pytest.approx(pct([1.0, 1.9, 0.5, 0.8, 0.3], 90), **APPROX)
    assert e2el["mean"] == pytest.approx(4.5 / 5, **APPROX)


def test_tpot_excludes_single_token_replies_and_uses_chunk_counts_without_usage(golden):
    # m1-0: 0.5 s / 4, m3-0 (no usage: 3 streamed tokens): 1.0 / 2, s1-0: 0.2 / 1, m1-1: 0.3 / 4
    tpot = [0.125, 0.5, 0.2, 0.075]
    s = golden.summary
    assert s["tpot_s"]["count"] == 4
    assert s["tpot_s"]["p90"] == pytest.approx(0.41, **APPROX)
    assert s["interactivity_p90"] == pytest.approx(1 / 0.41, **APPROX)
    assert s["interactivity_tok_s"]["max"] == pytest.approx(1 / 0.075, **APPROX)
    assert s["tpot_s"]["p50"] == pytest.approx(pct(tpot, 50), **APPROX)


def test_itl_is_token_weighted(golden):
    # gap / tokens of the later chunk, each token counted once:
    # m1-0: 0.2/2 x2, 0.3/2 x2; s1-0: 0.2/1; m1-1: 0.3/3 x3; m3-0: 0.5, 0.5
    samples = [0.1, 0.1, 0.15, 0.15, 0.2, 0.1, 0.1, 0.1, 0.5, 0.5]
    s = golden.summary["itl_s"]
    assert s["count"] == 10
    assert s["mean"] == pytest.approx(0.2, **APPROX)  # unweighted per-chunk mean would be 0.258
    assert s["p50"] == pytest.approx(0.125, **APPROX)
    assert s["p90"] == pytest.approx(pct(samples, 90), **APPROX)
    per_request = dict(
        zip(golden.per_request["request_id"], golden.per_request["itl"], strict=True)
    )
    assert per_request["m1-0"] == pytest.approx(0.5 / 4, **APPROX)
    assert np.isnan(per_request["m1-2"])


def test_e2e_normalized_interactivity(golden):
    per_token = [1.0 / 5, 1.9 / 3, 0.5 / 2, 0.8 / 5, 0.3 / 1]
    assert golden.summary["e2e_interactivity_p90"] == pytest.approx(
        1 / pct(per_token, 90), **APPROX
    )


def test_tpgs_and_its_parts_use_manifest_gpus(golden):
    s = golden.summary
    gpu_seconds = 2 * (4.3 - 1.0)  # n_gpus 2; first ok send 1.0, last ok done 4.3
    prompt = 100 + 80 + 50 + 120 + 130  # m3 reported nothing: the trace's expected 80
    output = 5 + 3 + 2 + 5 + 1
    cached = 0 + 32 + 96  # unreported cached counts as uncached
    assert s["n_gpus"] == 2 and s["n_gpus_source"] == "manifest"
    assert s["tpgs"] == pytest.approx((prompt + output) / gpu_seconds, **APPROX)
    parts = s["tpgs_parts"]
    assert parts["cached"] == pytest.approx(cached / gpu_seconds, **APPROX)
    assert parts["uncached_input"] == pytest.approx((prompt - cached) / gpu_seconds, **APPROX)
    assert parts["output"] == pytest.approx(output / gpu_seconds, **APPROX)


def test_throughput(golden):
    t = golden.summary["throughput"]
    assert t["duration_s"] == pytest.approx(3.3, **APPROX)
    assert t["requests_per_s"] == pytest.approx(5 / 3.3, **APPROX)
    assert t["output_tokens_per_s"] == pytest.approx(16 / 3.3, **APPROX)
    assert t["sessions_per_s"] == pytest.approx(2 / 3.3, **APPROX)  # tasks m1 (+s1) and m3


def test_goodput(golden):
    g = golden.summary["goodput"]
    # m3-0 misses TTFT 0.6 s; m1-2 has no TPOT (one token) so it cannot miss TPOT.
    assert g["requests_meeting"] == 4 and g["requests"] == 5
    assert g["requests_per_s"] == pytest.approx(4 / 3.3, **APPROX)
    assert g["tasks_meeting"] == 1
    assert g["attained"]["ttft_p90"] == {"value": pytest.approx(0.68, **APPROX), "met": False}


def test_cache_hit_rate_and_miss_attribution(golden):
    s = golden.summary
    assert s["cache_hit_rate"] == pytest.approx(128 / 270, **APPROX)  # m1-0, s1-0, m1-1 reported
    assert s["ideal_cache_hit_rate"] == pytest.approx(144 / 270, **APPROX)
    # The golden trace does not match the records, so the recorded ideal is kept and the split is
    # the approximate one: cold = prompt - ideal: m1-0 100, s1-0 50-48, m1-1 24, m1-2 130-112,
    # m3-0 80; ideal - cached (s1-0 48-32) has no evidence without the walk: unexplained, never
    # evicted; unreported = the ideal of m1-2 (112).
    miss = s["cache"]["miss_tokens"]
    assert {k: v for k, v in miss.items() if v} == {
        "cold": 224.0,
        "unexplained": 16.0,
        "unreported": 112.0,
    }
    assert miss["evicted"] == 0.0
    assert s["cache"]["ideal"]["miss_attribution"].startswith("approximate")
    classes = dict(zip(golden.misses["request_id"], golden.misses["miss_class"], strict=True))
    assert classes == {
        "m1-0": "cold",
        "m3-0": "unreported",
        "s1-0": "unexplained",
        "m1-1": "cold",
        "m1-2": "unreported",
    }
    moves = s["cache"]["session_moves"]
    assert moves["moved"]["requests"] == 1  # m1-2 went to e2 after m1-1 on e1
    assert moves["stayed"]["requests"] == 1 and moves["stayed"]["cache_hit_rate"] == pytest.approx(
        0.8
    )


def test_cache_breakdown_by_turn(golden):
    from harness.analysis.cache import breakdown

    table = breakdown(golden.run.ok, golden.misses, "turn")
    assert table.loc[0.0, "requests"] == 3 and table.loc[0.0, "reported"] == 2
    assert table.loc[0.0, "hit_rate"] == pytest.approx(32 / 150)
    assert table.loc[1.0, "ideal_hit_rate"] == pytest.approx(0.8)


@pytest.mark.parametrize("with_trace", [False, True])
def test_sessions_critical_path_and_join_wait(tmp_path, with_trace):
    run = load_run(write_run(tmp_path / "run", trace=GOLDEN_TRACE if with_trace else None))
    result = analyze(run)
    tasks = result.tasks.set_index("task")
    m1 = tasks.loc["m1"]
    assert m1["complete"] and m1["requests"] == 4
    assert result.graph.critical_path("m1") == [
        "m1-0",
        "s1-0",
        "m1-1",
        "m1-2",
    ]  # the join waited on s1
    assert sorted(result.graph.links("m1")) == [("m1-0", "s1-0"), ("s1-0", "m1-1")]
    assert m1["critical_path_service_s"] == pytest.approx(1.0 + 0.5 + 0.8 + 0.3)
    assert m1["join_wait_s"] == pytest.approx(2.6 - 2.0)
    assert m1["completion_s"] == pytest.approx(4.3 - 1.0)
    assert not tasks.loc["m2", "complete"] and not tasks.loc["w0", "complete"]
    s = result.summary["sessions"]
    assert s["structure"] == ("trace" if with_trace else "inferred")
    assert s["tasks_complete"] == 2
    assert s["task_completion_s"]["p50"] == pytest.approx((3.3 + 1.9) / 2)


def test_analyze_run_writes_summary_with_stable_keys(tmp_path):
    run_dir = write_run(tmp_path / "run")
    summary = analyze_run(run_dir, gpus=4)
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk == summary
    for key in ("ttft_s", "tpot_s", "itl_s", "e2el_s"):
        assert set(on_disk[key]) == {"p50", "p90", "p95", "p99", "mean", "max", "count"}
    for key in (
        "interactivity_p90",
        "e2e_interactivity_p90",
        "tpgs",
        "tpgs_parts",
        "cache_hit_rate",
        "ideal_cache_hit_rate",
        "requests_ok",
        "requests_failed",
        "throughput",
        "sessions",
    ):
        assert key in on_disk
    assert on_disk["n_gpus_source"] == "argument"
    assert (run_dir / "histograms.json").is_file()


def test_a_task_that_started_in_warmup_counts_but_one_ending_in_cooldown_does_not(tmp_path):
    from tests.analysis.golden import GOLDEN_RECORDS

    phases = {"m1-0": "warmup", "m3-0": "cooldown"}
    records = [dict(r, phase=phases.get(r["request_id"], r["phase"])) for r in GOLDEN_RECORDS]
    tasks = analyze(load_run(write_run(tmp_path / "r", records=records))).tasks.set_index("task")
    assert tasks.loc["m1", "complete"] and tasks.loc["m1", "completion_s"] == pytest.approx(3.3)
    assert not tasks.loc["m3", "complete"]


# A later cycle's prompts start with its salt segment ("cycle1", harness/trace/cycles.py): 8 tokens
# of the golden trace's synthetic content, so the cycled records' prompts are that much longer.
CYCLE_SALT_TOKENS = 8


def _cycled(record: dict, shift: float) -> dict:
    """The same request on the trace's next pass (harness.trace.cycles): `<id>@c1`, later."""
    out = dict(record, session_id=record["session_id"] + "@c1")
    out["request_id"] = f"{out['session_id']}-{record['turn']}"
    if record["parent_session_id"]:
        out["parent_session_id"] = record["parent_session_id"] + "@c1"
    for key in ("t_scheduled", "t_sent", "t_first_token", "t_last_token", "t_done"):
        out[key] = None if record[key] is None else record[key] + shift
    out["chunk_times"] = [t + shift for t in record["chunk_times"]]
    for key in ("prompt_tokens_expected", "prompt_tokens"):  # the cycle's salt starts its prompts
        out[key] = None if record[key] is None else record[key] + CYCLE_SALT_TOKENS
    return out


def test_a_cycled_pass_is_a_task_with_its_full_structure(tmp_path):
    from tests.analysis.golden import GOLDEN_RECORDS

    task = [r for r in GOLDEN_RECORDS if r["session_id"] in ("m1", "s1")]
    records = [*GOLDEN_RECORDS, *(_cycled(r, 10.0) for r in task)]
    run = load_run(write_run(tmp_path / "run", records=records, trace=GOLDEN_TRACE))
    result = analyze(run)
    tasks = result.tasks.set_index("task")
    assert result.graph.critical_path("m1@c1") == ["m1@c1-0", "s1@c1-0", "m1@c1-1", "m1@c1-2"]
    assert sorted(result.graph.links("m1@c1")) == [("m1@c1-0", "s1@c1-0"), ("s1@c1-0", "m1@c1-1")]
    first, cycled = tasks.loc["m1"], tasks.loc["m1@c1"]
    for key in ("critical_path_sub_requests", "critical_path_service_s", "join_wait_s"):
        assert cycled[key] == pytest.approx(first[key]), key
    assert cycled["critical_path_sub_requests"] == 1 and cycled["complete"]
