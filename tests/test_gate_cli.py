"""`harness gate` end to end on the simulated engine: run folders, gate.json, gate.md, exit codes;
bad input is one line and exit 2 before any run."""

from __future__ import annotations

import json

import pytest

from harness.cli import main

SIM = ["--set", "target.engine.options.runner=simulated", "--set", "load.max_duration_s=1.5"]
QUICK = "scenarios/quickstart.yaml"
CODES = {"no change detected": 0, "regressed": 1, "inconclusive": 4}


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    out = tmp_path_factory.mktemp("g") / "gate"
    code = main(
        [
            "gate",
            QUICK,
            *SIM,
            "--candidate-set",
            "target.engine.options.step_time_scale=1.3",
            "--min-runs",
            "2",
            "--max-runs",
            "2",
            "--max-host-load",
            "100",
            "-o",
            str(out),
            "--quiet",
        ]
    )
    return out, code


@pytest.mark.slow
def test_the_gate_runs_pairs_and_writes_one_verdict(interleaved):
    out, code = interleaved
    doc = json.loads((out / "gate.json").read_text())
    assert doc["verdict"] in CODES and code == doc["exit_code"] == CODES[doc["verdict"]]
    assert [r["path"].rsplit("/", 1)[-1] for r in doc["runs"]] == ["a1", "b1", "b2", "a2"]
    assert all((out / name / "summary.json").is_file() for name in ("a1", "b1", "b2", "a2"))
    assert doc["mode"] == "interleaved" and doc["rule"]["alpha_per_look"] == pytest.approx(0.05)
    for run in doc["runs"]:
        assert run["host"]["others_load_per_cpu"] is not None  # sampled on Linux
    assert "verdict:" in (out / "gate.md").read_text()


@pytest.mark.slow
def test_one_configuration_is_judged_against_history(interleaved, tmp_path):
    past, _ = interleaved
    code = main(
        [
            "gate",
            QUICK,
            *SIM,
            "--history",
            str(past / "a*"),
            "--min-runs",
            "2",
            "--max-runs",
            "2",
            "--max-host-load",
            "100",
            "-o",
            str(tmp_path / "g"),
            "--quiet",
        ]
    )
    doc = json.loads((tmp_path / "g" / "gate.json").read_text())
    assert doc["mode"] == "history" and doc["runs_tried"] == {"a": 0, "b": 2}
    assert code == doc["exit_code"] == CODES[doc["verdict"]]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "nothing to judge against"),
        (["--candidate-set", "load.concurrency=3"], "candidate's load differs"),
        (["--history", "/nonexistent/run-*"], "matches no run folder"),
        (["--candidate-set", "x=1", "--min-runs", "1"], "--min-runs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    assert main(["gate", QUICK, *SIM, *extra, "-o", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "g" / "a1").exists()


def test_an_output_folder_in_use_is_refused(tmp_path, capsys):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "x").write_text("")
    args = ["gate", QUICK, "--candidate-set", "load.warmup_s=0", "-o", str(tmp_path / "g")]
    assert main(args) == 2 and "not empty" in capsys.readouterr().err
