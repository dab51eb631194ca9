"""`harness gate` end to end on the simulated engine: run folders, gate.json, gate.md, exit codes;
bad input is one line and exit 2 before any run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.app.cli import main
from harness.app.gate.calibrations import calibration_key
from harness.app.gate.rule import Rule
from harness.app.scenario import load_scenario

SIM = ["--set", "target.engine.options.runner=simulated", "--set", "load.max_duration_s=1.5"]
QUICK = "scenarios/quickstart.yaml"
CODES = {"no change detected": 0, "regressed": 1, "inconclusive": 4}


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    root = tmp_path_factory.mktemp("g")
    out = root / "gate"
    rule = Rule(min_runs=2, max_runs=2)
    calibration = {
        "key": calibration_key(load_scenario(QUICK, SIM[1::2]), rule),
        "rule": rule.to_json(),
        "runner": "simulated",
        "made": "2026-01-01T00:00Z",
        "runs": 8,
        "runs_left_out": 0,
        "rates": {"false_alarm": {"hits": 0, "n": 2}, "detect_+30%": {"hits": 2, "n": 2}},
    }
    (root / "calibration.json").write_text(json.dumps(calibration))
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
            "--max-wait-share",
            "1",
            "-o",
            str(out),
            "--calibration",
            str(root / "calibration.json"),
            "--quiet",
            # watched live and logged to MLflow at the end (tests/export test both in depth)
            "--metrics-port",
            "0",
            "--mlflow-tracking-uri",
            f"sqlite:///{root / 'mlflow.db'}",
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
    assert doc["mode"] == "interleaved" and doc["rule"]["alpha_final"] == pytest.approx(0.05)
    for run in doc["runs"]:
        assert run["host"]["others_load_per_cpu"] is not None  # sampled on Linux
        assert 0 <= run["host"]["wait_share"] <= 1  # schedstat, on Linux
    text = (out / "gate.md").read_text()
    assert "verdict:" in text
    assert (
        "the calibration of this gate's rule, runner, target and scenario (simulated runner" in text
    )
    assert "false alarms 0 of 2" in text and doc["calibration"]["rates"]["false_alarm"]["n"] == 2


@pytest.mark.slow
def test_the_gate_logs_each_run_with_its_verdict_to_mlflow(interleaved):
    mlflow = pytest.importorskip("mlflow", reason="MLflow is the [mlflow] extra")
    out, _ = interleaved
    verdict = json.loads((out / "gate.json").read_text())["verdict"]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{out.parent / 'mlflow.db'}")
    exp = client.get_experiment_by_name("agentic-harness")
    tags = {
        r.data.tags["harness.run_id"]: r.data.tags for r in client.search_runs([exp.experiment_id])
    }
    assert sorted(tags) == ["gate-a1", "gate-a2", "gate-b1", "gate-b2"]  # named by their gate
    for run_id, t in tags.items():
        role = "baseline" if run_id.rsplit("-", 1)[-1].startswith("a") else "candidate"
        assert (t["harness.verdict"], t["harness.verdict.by"]) == (verdict, "gate")
        assert t["harness.verdict.role"] == role


@pytest.mark.slow
def test_calibrate_writes_rates_for_every_kind(tmp_path):
    out = tmp_path / "cal"
    code = main(
        [
            "gate",
            QUICK,
            *SIM,
            "--calibrate",
            "--comparisons",
            "1",
            "--min-runs",
            "2",
            "--max-runs",
            "2",
            "--max-host-load",
            "100",
            "--max-wait-share",
            "1",
            "-o",
            str(out),
            "--quiet",
            "--set",
            f"results_dir={tmp_path / 'results'}",
        ]
    )
    doc = json.loads((out / "calibration.json").read_text())
    assert code == 0 and doc["cycles"] == 2 and doc["runs"] == 8
    assert {k: r["n"] for k, r in doc["rates"].items()} == {
        "false_alarm": 2,
        "detect_+10%": 2,
        "detect_+30%": 2,
    }
    installed = list((tmp_path / "results" / "calibrations").glob("simulated-*.json"))
    assert len(installed) == 1 and json.loads(installed[0].read_text())["key"] == doc["key"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir())[:4] == [
        "c1-a",
        "c1-a2",
        "c1-s10",
        "c1-s30",
    ]


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
            "--max-wait-share",
            "1",
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
    assert not (tmp_path / "g").exists()  # refused before the folder is made


def test_an_output_folder_in_use_is_refused(tmp_path, capsys):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "x").write_text("")
    args = ["gate", QUICK, "--candidate-set", "load.warmup_s=0", "-o", str(tmp_path / "g")]
    assert main(args) == 2 and "not empty" in capsys.readouterr().err


FAST = ["--min-runs", "2", "--max-runs", "2", "--max-host-load", "100", "--max-wait-share", "1"]


@pytest.mark.slow
def test_a_history_of_another_load_is_not_comparable_exit_5(interleaved, tmp_path, capsys):
    past, _ = interleaved
    args = ["gate", QUICK, *SIM, "--set", "load.concurrency=3", "--history", str(past / "a*")]
    code = main([*args, *FAST, "-o", str(tmp_path / "g"), "--format", "json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # stdout: the one JSON object; the run lines on stderr
    assert code == 5 and doc["verdict"] == "not comparable" and doc["exit_code"] == 5
    why = doc["judgement"]["why_not_comparable"]
    assert why.startswith("no history run is of this configuration; gate-a2 (and 1 earlier")
    assert why.endswith("different load, baseline gate-a2 vs run g-b1: load.concurrency 6 vs 3")
    assert "gate: 1 of at most 2 runs" in captured.err
    assert doc == json.loads((tmp_path / "g" / "gate.json").read_text())


@pytest.mark.slow
def test_a_first_night_is_recorded_when_its_glob_would_match_its_own_runs(tmp_path, capsys):
    history = str(tmp_path / "nightly-*" / "b*")
    out = tmp_path / "nightly-1"
    code = main(["gate", QUICK, *SIM, "--history", history, *FAST, "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "verdict: history recorded (exit 0), on 2 runs recorded" in text
    assert "first run of this history" in text
    bad = ["gate", QUICK, *SIM, "--history", str(tmp_path / "other-*/b*"), "-o", str(out) + "x"]
    assert main(bad) == 2
    assert "would not match this gate's own runs" in capsys.readouterr().err
    assert not Path(str(out) + "x").exists()
