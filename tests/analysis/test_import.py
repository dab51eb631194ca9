"""`harness import`: real exports of AIPerf and `vllm bench serve` (tests/analysis/fixtures/imports,
produced against the reference engine) become run folders whose analysis reproduces each tool's
own aggregates where the definitions agree, and says where they do not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.compare.verdict import compare_runs
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze, analyze_run
from harness.app.cli import main
from harness.errors import InputError
from harness.importers import import_run

IMPORTS = Path(__file__).parent / "fixtures" / "imports"
EXPORT = "profile_export.jsonl"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("imported")
    return {
        "aiperf": import_run("aiperf", IMPORTS / "aiperf", root / "aiperf"),
        "vllm-bench": import_run(
            "vllm-bench", IMPORTS / "vllm-bench" / "vllm-bench.json", root / "vllm"
        ),
    }


def test_vllm_bench_import_reproduces_vllms_own_statistics(runs):
    own = json.loads((IMPORTS / "vllm-bench" / "vllm-bench.json").read_text())
    a = analyze(load_run(runs["vllm-bench"]))
    ms = lambda v: v * 1e3  # noqa: E731
    assert ms(a.summary["ttft_s"]["mean"]) == pytest.approx(own["mean_ttft_ms"])
    assert ms(a.summary["ttft_s"]["p50"]) == pytest.approx(own["median_ttft_ms"])
    assert ms(a.summary["ttft_s"]["p99"]) == pytest.approx(own["p99_ttft_ms"])
    assert ms(a.summary["tpot_s"]["mean"]) == pytest.approx(own["mean_tpot_ms"])
    assert ms(a.summary["tpot_s"]["p99"]) == pytest.approx(own["p99_tpot_ms"])
    # vLLM's ITL is per chunk; the import counts a chunk as one token, so ours equals it here.
    assert ms(a.summary["itl_s"]["p50"]) == pytest.approx(own["median_itl_ms"])
    assert (
        a.summary["requests_ok"] == own["completed"]
        and a.summary["requests_failed"] == own["failed"]
    )
    assert a.summary["throughput"]["output_tokens_per_s"] == pytest.approx(
        own["output_throughput"], rel=0.01
    )


def test_aiperf_import_reproduces_aiperfs_own_statistics(runs):
    own = json.loads((IMPORTS / "aiperf" / "profile_export_aiperf.json").read_text())
    a = analyze(load_run(runs["aiperf"]))
    for q in ("p50", "p90", "p99"):
        assert a.summary["ttft_s"][q] * 1e3 == pytest.approx(own["time_to_first_token"][q])
        # AIPerf's "inter token latency" is our TPOT (run with --use-server-token-count).
        assert a.summary["tpot_s"][q] * 1e3 == pytest.approx(own["inter_token_latency"][q])
    assert a.summary["e2el_s"]["p50"] * 1e3 == pytest.approx(own["request_latency"]["p50"])
    assert a.summary["requests_ok"] == own["request_count"]["avg"]
    assert a.summary["cache_hit_rate"] > 0  # the server's cached tokens came through


@pytest.mark.slow
def test_imported_runs_are_marked_and_say_what_differs(runs, capsys):
    for tool, run in runs.items():
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["imported"]["tool"] == tool and manifest["imported"]["notes"]
        assert any("cached_tokens_ideal" in n for n in manifest["imported"]["notes"])
    result = compare_runs(runs["vllm-bench"], runs["aiperf"])
    assert len(result.rows) > 10 and any(
        n.startswith("aiperf: imported from aiperf") for n in result.notes
    )
    assert main(["compare", str(runs["vllm-bench"]), str(runs["aiperf"])]) == 5  # trace unknown
    assert "defined differently" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_import_then_analyze_and_report(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["import", "vllm-bench", str(IMPORTS / "vllm-bench"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "TTFT" in printed and "defined differently or missing (--verbose)" in printed
    assert analyze_run(out)["requests_ok"] == 24
    assert main(["analyze", str(out)]) == 0  # the short summary counts the import's notes
    short = capsys.readouterr().out
    assert "from vllm-bench;" in short and "defined differently or missing (--verbose)" in short
    assert main(["analyze", str(out), "--verbose"]) == 0  # and every figure lists them
    table = capsys.readouterr().out
    assert "imported from vllm-bench" in table and "vLLM's ITL is every gap" in table
    assert (
        analyze_run(out)["imported"]["notes"]
        == json.loads((out / "manifest.json").read_text())["imported"]["notes"]
    )
    assert main(["report", str(out)]) == 0
    text = (out / "report.html").read_text()
    assert "was imported from" in text and "vllm-bench" in text


def test_cli_import_prints_one_json_object_with_format_json(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["import", "vllm-bench", str(IMPORTS / "vllm-bench"), "-o", str(out), "--format", "json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # nothing else on stdout
    assert doc["run_dir"] == str(out) and doc["tool"] == "vllm-bench"
    assert doc["requests_ok"] == 24 and doc["imported"]["tool"] == "vllm-bench"
    assert "imported " in captured.err


def test_failed_requests_are_records(tmp_path):
    own = json.loads((IMPORTS / "vllm-bench" / "vllm-bench.json").read_text())
    own["errors"][3] = "ClientConnectorError: Cannot connect to host"
    src = tmp_path / "failed.json"
    src.write_text(json.dumps(own))
    run = load_run(import_run("vllm-bench", src, tmp_path / "run"))
    failed = run.records[run.records["status"] == "error"]
    assert list(failed["error_class"]) == ["ClientConnectorError"] and len(run.ok) == 23


@pytest.mark.parametrize(
    ("tool", "content", "message"),
    [
        (
            "aiperf",
            '{"metadata": {"request_start_ns": 1}}\nnot json\n',
            r"export.jsonl:2: invalid JSON",
        ),
        (
            "vllm-bench",
            '{"duration": 1.0}',
            r"field 'start_times': missing 'start_times'.*--save-detailed",
        ),
    ],
)
def test_bad_exports_name_file_line_and_field(tmp_path, tool, content, message):
    src = tmp_path / ("export.jsonl" if tool == "aiperf" else "export.json")
    src.write_text(content)
    with pytest.raises(InputError, match=message):
        import_run(tool, src, tmp_path / "run")


@pytest.mark.parametrize("tool", ["aiperf", "guidellm", "vllm-bench"])
def test_a_folder_without_the_export_is_one_line_not_a_traceback(tmp_path, capsys, tool):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["import", tool, str(empty), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and str(empty) in err


def test_import_refuses_a_folder_that_holds_records(runs):
    with pytest.raises(InputError, match="already holds records"):
        import_run("aiperf", IMPORTS / "aiperf", runs["aiperf"])


def test_chunk_times_rebuild_the_streams_arrival_times(runs):
    run = load_run(runs["vllm-bench"])
    own = json.loads((IMPORTS / "vllm-bench" / "vllm-bench.json").read_text())
    first = run.records.iloc[0]
    assert np.allclose(np.diff(first["chunk_times"]), own["itls"][0])
    assert first["t_last_token"] - first["t_sent"] == pytest.approx(own["latencies"][0])


@pytest.mark.slow
def test_guidellm_import_reproduces_guidellms_own_means(tmp_path):
    own = json.loads((IMPORTS / "guidellm" / "benchmarks.json").read_text())["benchmarks"][0][
        "metrics"
    ]
    a = analyze(load_run(import_run("guidellm", IMPORTS / "guidellm", tmp_path / "g")))
    assert a.summary["ttft_s"]["mean"] * 1e3 == pytest.approx(
        own["time_to_first_token_ms"]["successful"]["mean"]
    )
    # GuideLLM's inter_token_latency is our TPOT; its TPOT includes TTFT, so it is larger than ours.
    assert a.summary["tpot_s"]["mean"] * 1e3 == pytest.approx(
        own["inter_token_latency_ms"]["successful"]["mean"]
    )
    assert own["time_per_output_token_ms"]["successful"]["mean"] > a.summary["tpot_s"]["mean"] * 1e3
    assert a.summary["itl_s"]["count"] == 0  # no chunk times in its report
    assert a.summary["requests_ok"] == 24


def test_guidellm_sweep_needs_a_benchmark_index(tmp_path):
    report = json.loads((IMPORTS / "guidellm" / "benchmarks.json").read_text())
    report["benchmarks"] *= 2
    src = tmp_path / "sweep.json"
    src.write_text(json.dumps(report))
    with pytest.raises(InputError, match="holds 2 benchmarks.*--benchmark N"):
        import_run("guidellm", src, tmp_path / "a")
    assert load_run(import_run("guidellm", src, tmp_path / "b", benchmark=1)).records.shape[0] == 24


# ---- AIPerf 0.13.0 replaying a Weka/AgentX trace (fixtures/imports/aiperf-weka) --------------


@pytest.fixture(scope="module")
def aiperf_weka(tmp_path_factory):
    return import_run("aiperf", IMPORTS / "aiperf-weka", tmp_path_factory.mktemp("w") / "run")


@pytest.mark.slow
def test_aiperf_weka_ideal_is_aiperfs_theoretical_hit_with_its_definition(aiperf_weka):
    own = json.loads((IMPORTS / "aiperf-weka" / "profile_export_aiperf.json").read_text())
    figure = own["theoretical_prefix_cache_hit"]
    s = analyze(load_run(aiperf_weka)).summary
    assert s["ideal_cache_hit_rate"] == pytest.approx(figure["avg"] / 100) and figure["avg"] > 0
    assert s["imported"]["ideal"]["blocks"] == figure["count"]
    assert "infinite per-session" in s["imported"]["ideal"]["definition"]


@pytest.mark.slow
def test_an_export_without_aiperfs_theoretical_hit_has_no_ideal_not_zero(runs):
    own = json.loads((IMPORTS / "aiperf" / "profile_export_aiperf.json").read_text())
    assert "theoretical_prefix_cache_hit" not in own
    s = analyze(load_run(runs["aiperf"])).summary
    assert s["ideal_cache_hit_rate"] is None and s["imported"]["ideal"] is None
    assert s["cache"]["by_agent"]["main"]["ideal_hit_rate"] is None  # not 0 either
    assert s["cache_hit_rate"] > 0


def test_aiperf_subagents_are_sub_sessions_of_their_task(aiperf_weka):
    rows = [json.loads(x) for x in (IMPORTS / "aiperf-weka" / EXPORT).read_text().splitlines()]
    deep = {r["metadata"]["x_request_id"] for r in rows if r["metadata"]["agent_depth"] >= 1}
    run = load_run(aiperf_weka)
    recs = run.records.set_index("request_id")
    assert len(deep) == 24 and set(recs.index[recs["agent"] == "sub"]) == deep
    subs = recs[recs["agent"] == "sub"]
    assert set(subs["parent_session_id"]) == {"s000000", "s000002"}
    assert all(
        s.startswith(f"{p}::sa:")
        for s, p in zip(subs["session_id"], subs["parent_session_id"], strict=True)
    )
    assert not recs.duplicated(["session_id", "turn"]).any()
    tasks = analyze(run).tasks
    assert set(tasks["task"]) >= {"s000000", "s000001", "s000002"}
    assert run.manifest["imported"]["settings"]["sessions_completed"] == 1  # AIPerf's own log


def test_aiperf_tasks_complete_as_aiperf_logged_them(aiperf_weka):
    from harness.report.text import summary_table

    s = analyze(load_run(aiperf_weka)).summary
    assert s["sessions"]["tasks_complete_by_tool"] == 1  # AIPerf's log: completed=1
    assert s["sessions"]["tasks_complete"] > 1  # every exported request of those tasks succeeded
    line = next(x for x in summary_table(s).splitlines() if x.startswith("tasks "))
    assert "1 complete by the tool's own log" in line, line


def test_aiperf_notes_match_the_data(aiperf_weka):
    """The TPOT note: AIPerf's inter token latency is our TPOT on the same server counts."""
    own = json.loads((IMPORTS / "aiperf-weka" / "profile_export_aiperf.json").read_text())
    s = analyze(load_run(aiperf_weka)).summary
    assert s["tpot_s"]["p50"] * 1e3 == pytest.approx(own["inter_token_latency"]["p50"])
    assert s["ttft_s"]["p90"] * 1e3 == pytest.approx(own["time_to_first_token"]["p90"])


def test_guidellms_percentiles_are_observed_values_ours_interpolate(tmp_path):
    own = json.loads((IMPORTS / "guidellm" / "benchmarks.json").read_text())["benchmarks"][0]
    ttft = own["metrics"]["time_to_first_token_ms"]["successful"]
    a = analyze(load_run(import_run("guidellm", IMPORTS / "guidellm", tmp_path / "g")))
    values = a.per_request["ttft"].to_numpy() * 1e3
    for q in (50, 90, 95):
        assert np.percentile(values, q, method="inverted_cdf") == pytest.approx(
            ttft["percentiles"][f"p{q}"]
        )
        assert a.summary["ttft_s"][f"p{q}"] * 1e3 == pytest.approx(np.percentile(values, q))
    assert a.summary["ttft_s"]["p50"] * 1e3 != pytest.approx(ttft["median"])  # the methods differ


def _guidellm_with_a_subagent(tmp_path) -> Path:
    """The committed report with its first conversation given a subagent, as GuideLLM's
    conversation graphs name them (info.agent_id, node_id, parent_node_ids): main_0 -> a1_0,
    a1_1 -> main_1, all in one conversation, turn_index a path depth shared with the parent."""
    report = json.loads((IMPORTS / "guidellm" / "benchmarks.json").read_text())
    reqs = report["benchmarks"][0]["requests"]["successful"][:4]
    conv = reqs[0]["info"]["conversation_id"]
    graph = [("main_0", "default", [], 0), ("a1_0", "explore", ["main_0"], 1),
             ("a1_1", "explore", ["a1_0"], 2), ("main_1", "default", ["main_0", "a1_1"], 1)]  # fmt: skip
    for r, (node, agent, parents, depth) in zip(reqs, graph, strict=True):
        r["info"].update(conversation_id=conv, node_id=node, agent_id=agent,
                         parent_node_ids=parents, turn_index=depth, preceding_nodes=depth)  # fmt: skip
    r = reqs[3]
    r["info"]["preceding_nodes"] = 3
    src = tmp_path / "graph.json"
    src.write_text(json.dumps(report))
    return src


def test_guidellm_subagents_are_their_own_sessions(tmp_path):
    run = load_run(import_run("guidellm", _guidellm_with_a_subagent(tmp_path), tmp_path / "g"))
    recs = run.records
    conv = recs.loc[recs["agent"] == "main", "session_id"].iloc[0]
    sub = recs[recs["agent"] == "sub"]
    assert list(sub["session_id"].unique()) == [f"{conv}.explore"]
    assert set(sub["parent_session_id"]) == {conv} and sorted(sub["turn"]) == [0, 1]
    main = recs[recs["session_id"] == conv]
    assert sorted(main["turn"]) == [0, 1]
    assert not recs.duplicated(["session_id", "turn"]).any()


def test_guidellm_branches_of_a_real_run_are_subagent_sessions(tmp_path):
    """GuideLLM 0.8.1, synthetic conversations of 4 turns with a 2-turn `explore` branch at turn 1
    (fixtures/imports/guidellm-agents): its turn_index repeats between a branch and its parent
    (8 duplicate (conversation, turn_index) keys), its node ids do not."""
    own = json.loads((IMPORTS / "guidellm-agents" / "benchmarks.json").read_text())
    infos = [r["info"] for r in own["benchmarks"][0]["requests"]["successful"]]
    keys = [(i["conversation_id"], i["turn_index"]) for i in infos]
    assert len(keys) - len(set(keys)) == 8
    run = load_run(import_run("guidellm", IMPORTS / "guidellm-agents", tmp_path / "g"))
    recs = run.records
    assert not recs.duplicated(["session_id", "turn"]).any()
    branch = {i["request_id"] for i in infos if i["agent_id"] == "explore"}
    sub = recs[recs["agent"] == "sub"]
    assert set(sub["request_id"]) == branch and len(branch) == 8
    assert all(
        s == f"{p}.explore"
        for s, p in zip(sub["session_id"], sub["parent_session_id"], strict=True)
    )
    main = recs[recs["session_id"] == sub["parent_session_id"].iloc[0]].sort_values("turn")
    assert list(main["turn"]) == [0, 1, 2, 3]
    tasks = analyze(run).tasks
    assert (tasks["sessions"] == 2).all() and len(tasks) == len(set(k[0] for k in keys))


def test_an_import_that_cannot_know_says_so(runs):
    """Without a trace or the tool's own count, completed tasks are unknown (not "all"), and the
    approximate miss split names what is missing and the command that makes it exact."""
    from harness.report.text import summary_table

    s = analyze(load_run(runs["vllm-bench"])).summary
    assert s["sessions"]["tasks_complete"] is None
    assert s["sessions"]["tasks_exported_ok"] >= 1
    assert s["cache"]["ideal"]["missing"].startswith("trace.jsonl")
    assert "harness replay TRACE" in s["cache"]["ideal"]["make_exact"]
    text = summary_table(s)
    assert "unknown complete" in next(x for x in text.splitlines() if x.startswith("tasks "))
    assert "exact with `harness replay TRACE" in text
