"""`harness serve` as a user runs it: a subprocess that prints its port, serves, and stops cleanly
on SIGINT; engine flags named as vLLM names them."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from harness.app.cli import main
from harness.app.commands.serve import add_engine_arguments, engine_config_from_args
from harness.engine.config import EngineConfig
from harness.errors import EngineError
from tests.waits import HANG_S


def parse(*argv: str) -> EngineConfig:
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    return engine_config_from_args(parser.parse_args(list(argv)))


def test_flags_map_to_engine_config_and_unset_flags_keep_its_defaults():
    assert parse() == EngineConfig()
    config = parse(
        "--block-size",
        "32",
        "--num-gpu-blocks-override",
        "100",
        "--max-num-batched-tokens",
        "512",
        "--max-num-seqs",
        "8",
        "--max-model-len",
        "4096",
        "--no-enable-prefix-caching",
        "--long-prefill-token-threshold",
        "256",
        "--prefill-schedule-interval",
        "2",
        "--cpu-offload-blocks",
        "50",
        "--runner",
        "simulated",
        "--preset",
        "small",
        "--seed",
        "3",
        "--device",
        "cpu",
        "--dtype",
        "bfloat16",
        "--served-model-name",
        "m",
    )
    assert config == EngineConfig(
        block_size=32,
        num_gpu_blocks=100,
        max_num_batched_tokens=512,
        max_num_seqs=8,
        max_model_len=4096,
        enable_prefix_caching=False,
        long_prefill_token_threshold=256,
        prefill_schedule_interval=2,
        cpu_offload_blocks=50,
        runner="simulated",
        preset="small",
        seed=3,
        device="cpu",
        dtype="bfloat16",
        served_model_name="m",
    )
    assert parse("--num-gpu-blocks", "64").num_gpu_blocks == 64
    assert parse("--kv-cache-memory-gb", "0.5").kv_cache_memory_gb == 0.5
    assert parse("--sim-time-scale", "0").sim_time_scale == 0.0
    assert parse("--debug-checks").debug_checks and not parse("--no-debug-checks").debug_checks
    assert parse("--enable-prefix-caching").enable_prefix_caching


def test_every_engine_config_field_has_a_flag():
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    dests = {a.dest for a in parser._actions}
    assert {f.name for f in dataclasses.fields(EngineConfig)} <= dests


def test_an_invalid_flag_value_is_one_line_naming_the_field(capsys):
    with pytest.raises(EngineError, match="block_size"):
        parse("--block-size", "0")
    assert main(["serve", "--port", "0", "--max-num-seqs", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("harness: error:") and "max_num_seqs" in err and "\n" not in err


def test_a_port_in_use_is_a_one_line_error(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert (
            main(["serve", "--port", str(port), "--num-gpu-blocks", "64", "--device", "cpu"]) == 2
        )
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def open_stream(url: str):
    body = {"prompt": [1000] * 8, "max_tokens": 1000, "ignore_eos": True, "stream": True}
    req = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    resp = urllib.request.urlopen(req, timeout=HANG_S)
    assert resp.readline().startswith(b"data: ")
    return resp


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_harness_serve_prints_its_port_serves_and_stops_on_a_signal(sig):
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "serve",
        "--engine",
        "reference",
        "--port",
        "0",
        "--num-gpu-blocks",
        "64",
        "--device",
        "cpu",
        "--served-model-name",
        "cli-model",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("serving on http://127.0.0.1:"), (
            line,
            proc.stderr.read() if proc.poll() else "",
        )
        url = line.removeprefix("serving on ")
        assert int(url.rsplit(":", 1)[1]) > 0
        with urllib.request.urlopen(f"{url}/health", timeout=HANG_S) as resp:
            assert resp.status == 200
        with urllib.request.urlopen(f"{url}/v1/models", timeout=HANG_S) as resp:
            assert json.load(resp)["data"][0]["id"] == "cli-model"
        stream = open_stream(url)  # in flight when the signal comes: aborted, not waited for
        proc.send_signal(sig)
        tail = stream.read().decode()
        assert (
            tail.endswith("data: [DONE]\n\n") and '"code"' in tail
        )  # an error event, then the end
        assert proc.wait(timeout=HANG_S) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
