"""What a new user meets first: a missing extra named in one line, "did you mean" for a typo,
a stop the scenario set read as an ending, notebook cells and warnings as the terminal writes them."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import pytest

from harness.analysis.ending import run_ending
from harness.app.cli import main
from harness.errors import HarnessWarning
from harness.report import notebook, tested

ROOT = Path(__file__).resolve().parents[1]


def test_the_quickstart_without_torch_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    out = tmp_path / "run"
    assert main(["run", str(ROOT / "scenarios" / "quickstart.yaml"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[engine]" in err[0] and "runner simulated" in err[0], err
    assert not out.exists()  # nothing written before the check


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["reprot"], "did you mean 'report'?"),
        (["trace", "stat", "x"], "did you mean 'stats'?"),
        (["analyze", "r", "--josn"], "did you mean '--json'?"),
        (["replay", "t", "--concurency", "2"], "did you mean '--concurrency'?"),
        (["run", "s.yaml", "--concurency", "3"], "--set: --set load.concurrency=3"),
        (["run", "s.yaml", "--concurrency", "3"], "--set: --set load.concurrency=3"),
        (["run", "s.yaml", "--max-duration=30"], "--set: --set load.max_duration_s=30"),
        (["simulate", "s.yaml", "--max-request", "40"], "--set: --set load.max_requests=40"),
    ],
)
def test_a_typo_gets_one_line_with_the_closest_word(argv, hint, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and hint in err[0], err


def test_a_mistyped_yaml_key_gets_the_closest_key(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nworkload: {sesions: 3}\ntarget: {kind: engine}\n")
    assert main(["run", str(path), "--validate-only"]) == 2
    err = capsys.readouterr().err
    assert "s.yaml:2: field 'workload.sesions': unknown key; did you mean 'sessions'?" in err


@pytest.mark.parametrize(
    ("slos", "line", "field"),
    [
        ("slos:\n  ttft_p90: 1s\n  interactivty_p90: 20\n", 6, "slos.interactivty_p90"),
        ("slos:\n  ttft_p90: fast\n", 5, "slos.ttft_p90"),
    ],
)
def test_a_bad_slo_points_at_its_own_line_and_names_its_field_once(
    tmp_path, capsys, slos, line, field
):
    path = tmp_path / "s.yaml"
    head = "name: x\nworkload: {profile: workloads/agentx-cpu.yaml}\ntarget: {kind: engine}\n"
    path.write_text(head + slos)
    assert main(["run", str(path), "--validate-only"]) == 2
    err = capsys.readouterr().err
    assert f"s.yaml:{line}: field '{field}': " in err and err.count("field '") == 1, err


def test_replay_without_model_names_the_flag_in_one_line(tmp_path, capsys):
    argv = ["replay", "t.jsonl", "-o", str(tmp_path / "r"), "--endpoint", "http://127.0.0.1:9"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--model is required" in err[0], err


def test_a_stop_at_the_scenarios_limit_is_an_ending_not_a_warning():
    manifest = {"status": "complete", "stopped_by": "max_duration", "unsent_requests": 18}
    assert run_ending(manifest) is None
    summary = {
        "tested": {"target": "t", "load": {"max_duration_s": 90}, "duration_s": 90.1},
        "run_end": {"stopped_by": "max_duration", "unsent_requests": 18},
    }
    duration = dict(tested.tested_rows(summary))["duration"]
    assert (
        "stopped at its 90 s limit (max_duration), as set; 18 of the trace's requests" in duration
    )
    assert run_ending({"status": "interrupted"}).startswith("interrupted")


def test_notebook_numbers_and_warnings_read_like_the_terminal(capsys):
    import pandas as pd

    notebook.setup()
    frame = notebook.table(pd.DataFrame({"a": [773.0, 6503.393716, 0.96712]}))
    assert list(frame["a"]) == ["773", "6503", "0.9671"]
    warnings.warn("/home/me/results/qs1: something skipped", HarnessWarning, stacklevel=1)
    out = capsys.readouterr().out
    assert out == "warning: qs1: something skipped\n"


@pytest.mark.slow
def test_simulate_json_prints_the_summary_and_no_table(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["simulate", str(ROOT / "scenarios" / "quickstart.yaml"), "-o", str(out), "--json"]
    assert main([*argv, "--set", "load.max_duration_s=3"]) == 0
    printed = capsys.readouterr()
    summary = json.loads(printed.out)  # stdout is the one object: no table, no report line
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["run_id"] == "run" and summary["requests_ok"] > 0
    assert "report: " in printed.err and "done: " in printed.err

    argv = [*argv[:3], str(tmp_path / "md"), "--format", "markdown"]
    assert main([*argv, "--set", "load.max_duration_s=3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    fence = lines.index("```text")
    assert "```" in lines[fence + 2 :] and any("TTFT" in line for line in lines[fence:])


@pytest.mark.slow
def test_a_sweep_in_json_is_its_points(tmp_path, capsys):
    scenario = tmp_path / "sweep.yaml"
    sweep = "sweep:\n  - param: load.concurrency\n    values: [1, 2]\n"
    scenario.write_text((ROOT / "scenarios" / "quickstart.yaml").read_text() + sweep)
    out = tmp_path / "run"
    argv = ["simulate", str(scenario), "-o", str(out), "--json", "--set", "load.max_duration_s=3"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["run_dir"] == str(out) and result["params"] == ["load.concurrency"]
    assert [p["point"] for p in result["points"]] == ["concurrency=1", "concurrency=2"]
    for point in result["points"]:
        on_disk = json.loads((out / point["point"] / "summary.json").read_text())
        assert {k: point[k] for k in on_disk} == on_disk and point["status"] == "complete"
    assert result["frontier"] and "saturation" in result


def test_validate_only_in_json(capsys):
    scenario = str(ROOT / "scenarios" / "quickstart.yaml")
    assert main(["run", scenario, "--validate-only", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"scenario": scenario, "ok": True, "points": 1}
