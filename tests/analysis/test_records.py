"""Bad run folders give one clear error naming the file and line; an interrupted run still loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.analysis.loader import load_run, load_runs
from harness.analysis.records import RunFolderWarning
from harness.app.cli import main
from harness.errors import RunFolderError
from tests.analysis.golden import GOLDEN_RECORDS, MANIFEST, write_run
from tests.waits import HANG_S


def test_loads_records_manifest_and_trace(tmp_path):
    run = load_run(write_run(tmp_path / "r"))
    assert len(run.records) == len(GOLDEN_RECORDS)
    assert run.name == "golden" and run.simulated and run.trace is None
    assert len(run.ok) == 5 and list(run.records["line"]) == list(range(1, 9))


def test_truncated_final_line_is_skipped_with_a_warning(tmp_path):
    path = write_run(tmp_path / "r")
    with (path / "records.jsonl").open("a") as fh:
        fh.write('{"run_id": "golden", "request_id": "cut')
    with pytest.warns(RunFolderWarning, match=r"records.jsonl:9: truncated final record skipped"):
        run = load_run(path)
    assert len(run.records) == len(GOLDEN_RECORDS) and run.warnings


def test_bad_line_in_the_middle_is_an_error_with_its_line(tmp_path):
    path = write_run(tmp_path / "r")
    lines = (path / "records.jsonl").read_text().splitlines()
    lines[2] = lines[2][:20]
    (path / "records.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(RunFolderError, match=r"records.jsonl:3: invalid JSON"):
        load_run(path)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("status", "weird", r"records.jsonl:1: field 'status': 'weird' is not one of"),
        ("t_sent", None, r"records.jsonl:1: field 't_sent': missing"),
        ("t_done", "soon", r"records.jsonl:1: field 't_done': expected a number"),
    ],
)
def test_bad_fields_name_line_and_field(tmp_path, field, value, message):
    records = [dict(GOLDEN_RECORDS[0], **{field: value}), *GOLDEN_RECORDS[1:]]
    with pytest.raises(RunFolderError, match=message):
        load_run(write_run(tmp_path / "r", records=records))


def test_unknown_schema_version(tmp_path):
    path = write_run(tmp_path / "r", manifest={**MANIFEST, "schema_version": 99})
    with pytest.raises(
        RunFolderError,
        match=r"manifest.json: field 'schema_version': unknown record schema version 99",
    ):
        load_run(path)


def test_missing_records_is_an_error(tmp_path):
    path = write_run(tmp_path / "r")
    (path / "records.jsonl").unlink()
    with pytest.raises(RunFolderError, match="records.jsonl: missing"):
        load_run(path)


def test_records_without_a_manifest_load_with_a_warning(tmp_path):
    path = write_run(tmp_path / "r")
    (path / "manifest.json").unlink()
    with pytest.warns(
        RunFolderWarning, match=r"manifest.json: no manifest.json; run id from the folder name"
    ):
        run = load_run(path)
    assert run.name == "r" and not run.simulated and len(run.records) == len(GOLDEN_RECORDS)


def test_a_partial_manifest_names_the_missing_keys(tmp_path):
    manifest = {k: v for k, v in MANIFEST.items() if k not in ("run_id", "status")}
    with pytest.warns(RunFolderWarning, match=r"partial manifest, missing run_id, status;"):
        run = load_run(write_run(tmp_path / "r", manifest=manifest))
    assert run.name == "r" and run.simulated  # what the manifest does say is kept


@pytest.mark.slow
def test_cli_analyzes_records_from_elsewhere_with_one_warning(tmp_path):
    path = write_run(tmp_path / "elsewhere")
    (path / "manifest.json").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "analyze", str(path), "--gpus", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"harness: warning: {path / 'manifest.json'}: no manifest.json; run id from the folder name, "
        "GPUs from --gpus (else 1), no server /metrics"
    ]
    summary = json.loads(proc.stdout)
    assert summary["run_id"] == "elsewhere" and summary["n_gpus"] == 2
    assert summary["requests_total"] > 0 and summary["server_cache"] is None


def test_glob_that_matches_nothing(tmp_path):
    with pytest.raises(RunFolderError, match="matches no run folder"):
        load_runs([str(tmp_path / "nothing-*")])


def test_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    path = write_run(tmp_path / "r", manifest={**MANIFEST, "schema_version": 99})
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "schema_version" in err


@pytest.mark.slow
def test_cli_analyze_json_and_slo_errors(tmp_path, capsys):
    path = write_run(tmp_path / "r")
    assert main(["analyze", str(path), "--json", "--slo", "ttft_p90=500ms", "--gpus", "8"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_gpus"] == 8 and out["goodput"]["slos"] == {"ttft_p90": 0.5}
    assert main(["analyze", str(path), "--slo", "latency=2s"]) == 2
    assert "unknown SLO metric 'latency'" in capsys.readouterr().err
    assert main(["analyze", str(path)]) == 0
    assert "5 ok, 1 failed" in capsys.readouterr().out


@pytest.mark.slow
def test_slos_from_the_scenario(tmp_path):
    from harness.analysis.summary import analyze_run

    path = write_run(tmp_path / "r")
    (path / "scenario.yaml").write_text("name: x\nslos:\n  ttft_p90: 2s\n  tpot: 50ms\n")
    assert analyze_run(path)["goodput"]["slos"] == {"ttft_p90": 2.0, "tpot": 0.05}


def test_an_unreadable_trace_is_a_warning_not_a_failure(tmp_path):
    path = write_run(tmp_path / "r")
    (path / "trace.jsonl").write_text('{"format": "something-else"}\n')
    with pytest.warns(RunFolderWarning, match="session structure inferred"):
        run = load_run(path)
    assert run.trace is None and run.warnings
