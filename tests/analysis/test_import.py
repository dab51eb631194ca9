"""`harness import`: real exports of AIPerf and `vllm bench serve` (tests/analysis/fixtures/imports,
produced against the reference engine) become run folders whose analysis reproduces each tool's
own aggregates where the definitions agree, and says where they do not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.compare.changes import compare_runs
from harness.analysis.run import load_run
from harness.analysis.summary import analyze, analyze_run
from harness.cli import main
from harness.errors import InputError
from harness.importers import import_run

IMPORTS = Path(__file__).parent / "fixtures" / "imports"


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


def test_imported_runs_are_marked_and_say_what_differs(runs, capsys):
    for tool, run in runs.items():
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["imported"]["tool"] == tool and manifest["imported"]["notes"]
        assert any("cached_tokens_ideal" in n for n in manifest["imported"]["notes"])
    result = compare_runs(runs["vllm-bench"], runs["aiperf"])
    assert len(result.rows) > 10 and any(
        n.startswith("aiperf: imported from aiperf") for n in result.notes
    )
    assert main(["compare", str(runs["vllm-bench"]), str(runs["aiperf"])]) == 0
    assert "defined differently" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_import_then_analyze_and_report(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["import", "vllm-bench", str(IMPORTS / "vllm-bench"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "TTFT" in printed and "vLLM's ITL is every gap" in printed
    assert analyze_run(out)["requests_ok"] == 24
    assert main(["analyze", str(out)]) == 0  # the terminal table lists the import notes too
    table = capsys.readouterr().out
    assert "imported from vllm-bench" in table and "vLLM's ITL is every gap" in table
    assert (
        analyze_run(out)["imported"]["notes"]
        == json.loads((out / "manifest.json").read_text())["imported"]["notes"]
    )
    assert main(["report", str(out)]) == 0
    text = (out / "report.html").read_text()
    assert "was imported from" in text and "vllm-bench" in text


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
