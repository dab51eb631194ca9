"""`harness simulate`: the quickstart on the virtual clock, twice, in two processes with different
hash seeds, gives byte-identical records.jsonl and a run folder the analyzer reads as any other."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.app.cli import main
from tests.gc_spy import note_threshold

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def _simulate(out: Path, hash_seed: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    argv = [sys.executable, "-m", "harness", "simulate", str(QUICKSTART), "-o", str(out)]
    argv += ["--quiet", "--set", "load.max_duration_s=20"]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_two_simulations_give_identical_records(tmp_path):
    # the same folder name: the run id (in every record) is the folder's name
    runs = [tmp_path / side / "run" for side in ("a", "b")]
    for out, seed in zip(runs, ("1", "2"), strict=True):
        done = _simulate(out, seed)
        assert done.returncode == 0, done.stderr
    first, second = ((r / "records.jsonl").read_bytes() for r in runs)
    assert first == second
    assert first.count(b"\n") > 100
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert manifest["clock"] == "virtual"
    assert manifest["simulated"] is True
    assert manifest["duration_s"] == pytest.approx(20.0, abs=5.0)  # simulated seconds, drain incl.
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert summary["requests_ok"] == first.count(b"\n")
    assert (runs[0] / "report.html").is_file()


def test_simulate_refuses_a_served_engine_in_one_line(tmp_path, capsys):
    argv = ["simulate", str(QUICKSTART), "-o", str(tmp_path / "r"), "--quiet"]
    code = main([*argv, "--set", "target.engine.mode=http"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "target.engine.options.clock" in err and "inprocess" in err


def test_run_refuses_virtual_on_the_torch_runner(tmp_path, capsys):
    argv = ["run", str(QUICKSTART), "-o", str(tmp_path / "r"), "--quiet"]
    code = main([*argv, "--set", "target.engine.options.clock=virtual"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "clock" in err and "runner: simulated" in err


def test_a_simulation_leaves_the_garbage_collector_as_it_found_it(tmp_path, monkeypatch):
    # the replay on the virtual clock and the analysis collect rarely (a batch job's choice),
    # and put the thresholds and the frozen set back when done
    import gc

    from harness import collector
    from harness.app import runner
    from harness.driver import replay_into

    seen: list[int] = []
    note_threshold(monkeypatch, runner, "analyze_once", seen)
    note_threshold(monkeypatch, replay_into.Replay, "run", seen)
    before = gc.get_threshold(), gc.get_freeze_count()
    argv = ["simulate", str(QUICKSTART), "-o", str(tmp_path / "r"), "--quiet"]
    assert main([*argv, "--set", "load.max_duration_s=3"]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
    assert seen == [collector.VIRTUAL_GEN0, collector.ANALYSIS_GEN0]


@pytest.mark.parametrize(
    ("verb", "module", "name"),
    [
        ("analyze", "harness.analysis.summary", "analyze_run"),
        ("report", "harness.app.reporting", "write_report"),
    ],
)
def test_analyze_and_report_alone_leave_the_collector_at_its_default(
    tmp_path, monkeypatch, verb, module, name
):
    # a fresh process measured the same either way (harness/collector.py): no policy there
    import gc
    import importlib

    run = tmp_path / "r"
    argv = ["simulate", str(QUICKSTART), "-o", str(run), "--quiet"]
    assert main([*argv, "--set", "load.max_duration_s=3"]) == 0
    seen: list[int] = []
    note_threshold(monkeypatch, importlib.import_module(module), name, seen)
    before = gc.get_threshold(), gc.get_freeze_count()
    assert main([verb, str(run)]) == 0
    assert seen == [before[0][0]]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
