"""A server says what produces its timings (/v1/models, /metrics, /version), and a replay against a
simulated one is flagged end to end: manifest, summary, terminal and report."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from harness.app.cli import main
from harness.engine.config import EngineConfig
from harness.serving.server import BackgroundServer
from harness.trace.generate import generate
from harness.trace.native import write_trace
from harness.trace.profile import load_profile
from tests.waits import HANG_S

MODEL = "agentic-harness-reference"


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=HANG_S) as resp:
        return resp.read()


@pytest.fixture(scope="module")
def simulated():
    config = EngineConfig(
        runner="simulated", sim_time_scale=0.0, num_gpu_blocks=2048, max_model_len=8192
    )
    with BackgroundServer(config) as running:
        yield running


def test_a_simulated_server_says_so_on_models_metrics_and_version(simulated):
    card = json.loads(get(f"{simulated.url}/v1/models"))["data"][0]
    assert card["id"] == MODEL
    meta = card["metadata"]
    assert meta["simulated"] is True and meta["runner"] == "simulated"
    assert meta["device"] == "simulated" and meta["modelled_device"] == "cpu"
    text = get(f"{simulated.url}/metrics").decode()
    info = re.search(r"^harness:engine_info\{(.*)\} 1\.0$", text, re.M)
    assert info is not None, text[:500]
    labels = dict(re.findall(r'(\w+)="([^"]*)"', info[1]))
    assert labels == {
        "model_name": MODEL,
        "runner": "simulated",
        "device": "simulated",
        "simulated": "true",
        "modelled_device": "cpu",
    }
    assert json.loads(get(f"{simulated.url}/version"))["simulated"] is True


@pytest.mark.slow
def test_a_torch_server_names_its_device_and_is_not_simulated():
    with BackgroundServer(EngineConfig(device="cpu", num_gpu_blocks=64)) as running:
        meta = json.loads(get(f"{running.url}/v1/models"))["data"][0]["metadata"]
        text = get(f"{running.url}/metrics").decode()
    assert (meta["runner"], meta["device"], meta["simulated"]) == ("torch", "cpu", False)
    assert 'runner="torch",device="cpu",simulated="false"' in text


@pytest.mark.slow
def test_a_replay_against_a_simulated_server_is_flagged_end_to_end(simulated, tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    profile = load_profile("workloads/agentx-cpu.yaml", overrides={"turns.median": 4})
    write_trace(generate(profile, seed=3, sessions=3), trace)
    run = tmp_path / "run"
    argv = ["replay", str(trace), "--endpoint", simulated.url, "--model", MODEL]
    assert main([*argv, "--concurrency", "2", "-o", str(run)]) == 0
    assert main(["analyze", str(run)]) == 0 and main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["simulated"] is True
    served = manifest["target"]["served_by"]
    assert served[0]["runner"] == "simulated" and served[0]["owned_by"] == "agentic-harness"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["simulated"] is True
    assert summary["tested"]["device"]["name"] == "simulated (cost model of cpu)"
    assert "[timings from a SIMULATED engine]" in out
    report = (run / "report.html").read_text()
    assert "data-simulated" in report and "Simulated engine" in report
