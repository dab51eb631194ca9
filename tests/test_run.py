"""`harness run` end to end: the quickstart at a smaller size on the real engine, in-process and
over real HTTP on loopback; a two-point sweep; Ctrl-C; one-line errors; shipped scenarios load."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.analysis.loader import load_run
from harness.analysis.records import RunFolderWarning
from harness.app.cli import main
from harness.app.scenario import load_scenario
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
SMALL = ["workload.sessions=2", "load.concurrency=2", "load.max_requests=40"]


def _check_run_folder(run_dir: Path, requests: int) -> dict:
    for name in (
        "scenario.yaml",
        "manifest.json",
        "trace.jsonl",
        "records.jsonl",
        "summary.json",
        "report.html",
    ):
        assert (run_dir / name).is_file(), name
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests_ok"] + summary["requests_failed"] <= requests
    assert summary["requests_ok"] > 0
    assert summary["requests_failed"] == 0
    run = load_run(run_dir)
    assert len(run.records) == requests
    assert load_scenario(run_dir / "scenario.yaml").name == "quickstart"  # re-runnable as is
    return summary


@pytest.mark.slow
def test_quickstart_in_process(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(["run", str(QUICKSTART), "-o", str(out), *sum((["--set", s] for s in SMALL), [])]) == 0
    )
    summary = _check_run_folder(out, 40)
    # the engine's prefix cache serves what an infinite cache would, on one engine
    assert summary["cache_hit_rate"] == pytest.approx(summary["ideal_cache_hit_rate"], abs=0.02)
    assert summary["server_cache"]["hit_rate"] == pytest.approx(summary["cache_hit_rate"], abs=0.02)
    printed = capsys.readouterr().out
    assert "TTFT" in printed and "report:" in printed


@pytest.mark.slow
def test_quickstart_over_http_with_chat(tmp_path):
    out = tmp_path / "run"
    sets = [*SMALL, "target.engine.mode=http", "target.api=chat"]
    assert (
        main(
            [
                "run",
                str(QUICKSTART),
                "-o",
                str(out),
                "--quiet",
                *sum((["--set", s] for s in sets), []),
            ]
        )
        == 0
    )
    summary = _check_run_folder(out, 40)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["endpoints"][0].startswith("http://127.0.0.1:")
    assert summary["server_cache"]["hit_rate"] > 0.5  # /metrics counters scraped before and after
    assert summary["n_gpus_source"] == "manifest"
    # the analyzer derives everything from the folder: analyzing again changes nothing
    written = (out / "summary.json").read_bytes()
    for _ in range(2):
        assert main(["analyze", str(out), "--json"]) == 0
        assert (out / "summary.json").read_bytes() == written
    assert main(["report", str(out)]) == 0
    hit = f"{summary['server_cache']['hit_rate']:.3f} ({summary['server_cache']['hits']:.0f} of"
    assert (
        f"server /metrics prefix-cache hit rate</td><td>{hit}" in (out / "report.html").read_text()
    )
    url = (out / "servers" / "server-0.log").read_text().split("serving on ")[1].split()[0]
    with pytest.raises(urllib.error.URLError):  # the server it started is stopped
        urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=2)


@pytest.mark.slow
def test_sweep_of_two_points_gives_two_runs_and_a_frontier(tmp_path):
    out = tmp_path / "sweep"
    sets = [
        "workload.sessions=2",
        "load.max_requests=15",
        "sweep=[{param: load.concurrency, values: [1, 2]}]",
    ]
    assert (
        main(
            [
                "run",
                str(QUICKSTART),
                "-o",
                str(out),
                "--quiet",
                *sum((["--set", s] for s in sets), []),
            ]
        )
        == 0
    )
    sweep = json.loads((out / "sweep.json").read_text())
    assert [p["point"] for p in sweep["points"]] == ["concurrency=1", "concurrency=2"]
    assert sweep["frontier"] and set(sweep["frontier"]) <= {"concurrency=1", "concurrency=2"}
    for point in ("concurrency=1", "concurrency=2"):
        assert (out / point / "summary.json").is_file()
    assert (out / "report.html").is_file()


@pytest.mark.slow
def test_ctrl_c_stops_the_engine_and_leaves_a_valid_run(tmp_path):
    out = tmp_path / "run"
    sets = [
        "workload.sessions=4",
        "load.concurrency=4",
        "target.engine.mode=http",
        "load.max_duration_s=300",
    ]
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "run",
        str(QUICKSTART),
        "-o",
        str(out),
        "--quiet",
        *sum((["--set", s] for s in sets), []),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records = out / "records.jsonl"
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        if records.exists() and records.read_text().count("\n") >= 10:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    with pytest.warns(RunFolderWarning, match="interrupted"):
        run = load_run(out)
    assert (run.records["status"] == "cancelled").any() or len(run.records) >= 10
    assert (out / "summary.json").is_file() and (out / "report.html").is_file()
    url = (out / "servers" / "server-0.log").read_text().split("serving on ")[1].split()[0]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: x\nworkload: {profile: workloads/agentx-cpu.yaml}\nload: {concurrency: 0}\n",
            "field 'load.concurrency'",
        ),
        (
            "name: x\nworkload: {profile: workloads/agentx-cpu.yaml}\ntarget: {engine: {options: {block_sise: 16}}}\n",
            "field 'target.engine.options'",
        ),
        (
            "name: x\nworkload: {profile: workloads/agentx-cpu.yaml}\nslos: {ttft_p90: fast}\n",
            "field 'slos.ttft_p90'",
        ),
        ("name: x\nworkload: {trace: missing.jsonl}\n", "missing.jsonl"),
    ],
)
@pytest.mark.slow
def test_bad_scenarios_fail_with_one_line(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(path), "-o", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_S,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr


@pytest.mark.slow
def test_unreachable_endpoint_is_one_line(tmp_path):
    path = tmp_path / "ep.yaml"
    path.write_text(
        "name: ep\nworkload: {profile: workloads/agentx-cpu.yaml, sessions: 1}\n"
        "target: {kind: endpoints, model: m, endpoints: [{url: 'http://127.0.0.1:9/v1'}]}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(path), "-o", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_S,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "127.0.0.1:9" in proc.stderr


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_scenario_validates(path):
    scenario = load_scenario(path)
    assert scenario.points()
    assert os.path.isfile(scenario.workload.profile or scenario.workload.trace)


@pytest.mark.slow
def test_kill_9_leaves_no_server_and_a_harness_folder_in_cwd_shadows_nothing(tmp_path):
    decoy = tmp_path / "harness"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy was imported')\n")
    out = tmp_path / "run"
    sets = ["workload.sessions=2", "load.concurrency=2", "target.engine.mode=http"]
    sets.append("load.max_duration_s=300")
    cmd = [sys.executable, "-P", "-m", "harness", "run", str(QUICKSTART), "-o", str(out)]
    cmd += ["--quiet", *sum((["--set", s] for s in sets), [])]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    records = out / "records.jsonl"
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and not (records.exists() and records.stat().st_size):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.1)
    url = (out / "servers" / "server-0.log").read_text().split("serving on ")[1].split()[0]
    proc.kill()
    proc.wait(HANG_S)
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:  # the child got SIGTERM when its parent died
        try:
            urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=1)
        except (urllib.error.URLError, ConnectionError):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the harness serve child outlived its parent")
    with pytest.warns(RunFolderWarning, match="crashed / not closed"):
        run = load_run(out)
    assert "crashed / not closed" in run.warnings[-1]
