"""`harness record` as a user runs it: a process that prints where it listens, records until
Ctrl-C and leaves a valid trace; `--rebuild`; bad flags in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from harness.trace.formats import load_trace
from tests.record.conftest import API_KEY
from tests.waits import HANG_S


def _start(args: list[str]) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "XDG_CONFIG_HOME": args[-1] + "-config"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "record", *args[:-1]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line + proc.stderr.read()
    return proc, line.split("listening on ")[1].split(",")[0]


@pytest.mark.slow
def test_ctrl_c_leaves_a_valid_trace_and_rebuild_makes_it_again(sim_server, tmp_path):
    import openai

    folder = tmp_path / "rec"
    proc, url = _start(
        [
            "--upstream",
            sim_server.url,
            "-o",
            str(folder),
            "--tokenizer",
            "reference",
            str(tmp_path / "home"),
        ]
    )
    with openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0) as client:
        for _ in range(2):
            client.chat.completions.create(
                model="agentic-harness-reference",
                max_tokens=3,
                messages=[{"role": "user", "content": "hello there"}],
            )
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 0, err
    assert "recorded 2 requests (2 in the trace" in err
    assert load_trace(folder / "trace.jsonl").num_requests == 2
    (folder / "trace.jsonl").unlink()
    subprocess.run(
        [sys.executable, "-m", "harness", "record", "--rebuild", str(folder)],
        check=True,
        capture_output=True,
        timeout=HANG_S,
    )
    assert load_trace(folder / "trace.jsonl").num_requests == 2
    summary = json.loads((folder / "recording.json").read_text())
    assert summary["settings"]["tokenizer"] == "reference" and summary["complete"] is True
    salt = tmp_path / "home-config" / "agentic-harness" / "record.salt"
    assert salt.stat().st_mode & 0o777 == 0o600
    assert summary["settings"]["salt_fingerprint"]


def test_a_crash_leaves_whole_lines_and_the_last_trace(tmp_path):
    """Killed mid-write, the log's cut last line is skipped; what was whole is read."""
    from harness.record.log import read

    folder = tmp_path / "rec"
    folder.mkdir()
    good = {"kind": "request", "id": 0, "t_sent": 0.0, "api": "chat", "path": "/v1/x"}
    (folder / "requests.jsonl").write_text(json.dumps(good) + '\n{"kind": "done", "id"')
    assert list(read(folder).requests) == [0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "x"], "needs --upstream URL and -o DIR"),
        (["--upstream", "http://[::1", "-o", "x"], "--upstream"),
        (
            ["--upstream", "http://127.0.0.1:9", "-o", "x", "--block-tokens", "0"],
            "--block-tokens must be at least 1",
        ),
    ],
)
def test_bad_flags_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    from harness.app.cli import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["record", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
