"""`harness replay` end to end in a subprocess: summary, exit codes, secrets, Ctrl-C / SIGTERM."""

import argparse
import asyncio
import os
import signal
import sys

import orjson
import pytest

from harness.app.cli import build_parser
from harness.trace.native import write_trace
from tests.driver.helpers import ideal_by_id, load_manifest, load_records, sess, trace
from tests.waits import HANG_S

SECRET = "sk-never-write-me-4242"


def _trace_file(tmp_path, sessions):
    path = tmp_path / "trace.jsonl"
    write_trace(trace(*sessions), path)
    return path


async def _harness(*args, env=None):
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "harness",
        *map(str, args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    return proc


@pytest.mark.slow
async def test_replay_command_with_api_key(server, tmp_path):
    path = _trace_file(
        tmp_path,
        [sess(f"s{i}", [(8, 3, 0)] * 2) for i in range(3)] + [sess("fault-http500-x", [(8, 3, 0)])],
    )
    run = tmp_path / "run"
    proc = await _harness(
        "replay",
        path,
        "--endpoint",
        server.url,
        "--model",
        "m",
        "--concurrency",
        "2",
        "-o",
        run,
        "--api-key-env",
        "TEST_KEY",
        "--header",
        "X-Team: bench",
        "--warmup-requests",
        "1",
        env={"TEST_KEY": SECRET},
    )
    out, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    assert proc.returncode == 0, err.decode()
    assert b"7 requests (error 1, ok 6)" in err and b"HTTP500 1" in err
    records = load_records(run)
    assert len(records) == 7 and records[0]["phase"] == "warmup"
    manifest = load_manifest(run)
    assert (
        manifest["status"] == "complete"
        and manifest["run_id"] == "run"
        and len(manifest["trace_sha256"]) == 64
    )
    assert manifest["target"]["header_names"] == ["X-Team"]
    everything = out + err + b"".join(p.read_bytes() for p in run.iterdir())
    assert SECRET.encode() not in everything and b"bench" not in everything
    assert all(e["authorization"] == f"Bearer {SECRET}" for e in server.log)


@pytest.mark.slow
async def test_replay_json_is_one_object_on_stdout(server, tmp_path):
    path = _trace_file(tmp_path, [sess(f"s{i}", [(8, 3, 0)] * 2) for i in range(2)])
    run = tmp_path / "run"
    args = ("replay", path, "--endpoint", server.url, "--model", "m", "-o", run, "--json")
    proc = await _harness(*args)
    out, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    assert proc.returncode == 0, err.decode()
    result = orjson.loads(out)  # stdout is the one object, nothing else
    assert result["status"] == "complete" and result["stopped_by"] == "trace_end"
    assert result["requests"] == 4 and result["by_status"] == {"ok": 4}
    assert result["sessions_started"] == 2 and result["errors_by_class"] == {}
    assert result["run_dir"] == str(run) and result["duration_s"] > 0
    assert b"harness: complete" not in err  # the table's line is not printed beside it

    proc = await _harness(*args[:-3], "-o", tmp_path / "md", "--format", "markdown")
    out, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == "```text" and lines[-1] == "```" and "4 requests (ok 4)" in lines[1]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_interrupted_run_leaves_valid_records_and_manifest(make_server, tmp_path, sig):
    srv = await make_server(token_delay=0.02)
    path = _trace_file(tmp_path, [sess(f"s{i}", [(8, 40, 0)] * 20) for i in range(4)])
    run = tmp_path / "run"
    proc = await _harness(
        "replay", path, "--endpoint", srv.url, "--model", "m", "--concurrency", "4", "-o", run
    )
    records = run / "records.jsonl"
    while not (records.exists() and records.stat().st_size > 0) and proc.returncode is None:
        await asyncio.sleep(0.05)  # until a record is written (pytest's timeout bounds a hang)
    assert proc.returncode is None, "the run ended before it wrote a record"
    proc.send_signal(sig)
    _, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    assert proc.returncode == 130, err.decode()
    lines = records.read_bytes().splitlines()
    recs = [orjson.loads(line) for line in lines]
    statuses = [r["status"] for r in recs]
    assert "ok" in statuses and statuses.count("cancelled") == 4  # one per session in flight
    manifest = load_manifest(run)
    assert manifest["status"] == "interrupted" and manifest["ended_at"]
    assert manifest["stopped_by"] == "signal"
    assert (manifest["signal"], manifest["stopped_in"]) == (sig.name, "run")
    assert manifest["counts"]["requests"] == len(recs)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--header", "novalue"], "--header"),
        (["--api-key-env", "UNSET_VAR_FOR_TEST"], "UNSET_VAR_FOR_TEST"),
        (["--session-rate", "0"], "session_rate"),
        (["--cooldown", "3"], "cooldown"),
    ],
)
@pytest.mark.slow
async def test_bad_input_is_one_line(server, tmp_path, extra, message):
    path = _trace_file(tmp_path, [sess("a", [(8, 3, 0)])])
    proc = await _harness(
        "replay", path, "--endpoint", server.url, "--model", "m", "-o", tmp_path / "r", *extra
    )
    _, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error:") and message in lines[0]


@pytest.mark.slow
async def test_rerun_into_a_used_folder_is_refused(server, tmp_path):
    path = _trace_file(tmp_path, [sess("a", [(8, 3, 0)])])
    args = ("replay", path, "--endpoint", server.url, "--model", "m", "-o", tmp_path / "r")
    for expected in (0, 2):
        proc = await _harness(*args)
        _, err = await asyncio.wait_for(proc.communicate(), HANG_S)
        assert proc.returncode == expected, err.decode()
    assert b"already holds records" in err


def test_help_documents_every_flag():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    replay = sub.choices["replay"]
    text = replay.format_help()
    for action in replay._actions:
        for opt in action.option_strings:
            assert opt in text
        assert action.help, action.dest


@pytest.mark.slow
async def test_replay_of_a_mooncake_trace(server, tmp_path):
    # An imported, block-addressed trace: prompts are whole blocks of shared hash ids.
    path = tmp_path / "mooncake.jsonl"
    lines = [
        {"timestamp": 0, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2, 3]},
        {"timestamp": 50, "input_length": 1500, "output_length": 4, "hash_ids": [1, 2, 4]},
        {"timestamp": 100, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]},
    ]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    run = tmp_path / "run"
    args = (
        "replay",
        path,
        "--endpoint",
        server.url,
        "--model",
        "m",
        "--timestamps",
        "--time-scale",
        "1",
    )
    proc = await _harness(
        *args, "--from", "mooncake", "--api", "completions", "--block-size", "16", "-o", run
    )
    _, err = await asyncio.wait_for(proc.communicate(), HANG_S)
    assert proc.returncode == 0, err.decode()
    recs = sorted(load_records(run), key=lambda r: r["t_scheduled"])
    assert [r["status"] for r in recs] == ["ok"] * 3
    assert [r["prompt_tokens"] for r in recs] == [1100, 1500, 600]
    # the 2nd shares blocks 1-2 (1024 tokens) with the 1st; the 3rd is blocks 1-2 itself (capped)
    ideal = ideal_by_id(run)  # from the trace.jsonl `harness replay` keeps in the run folder
    assert [ideal[r["request_id"]] for r in recs] == [0, 1024, 592]
    assert [r["cached_tokens"] for r in recs] == [0, 1024, 592]
