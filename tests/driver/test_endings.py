"""Runs that end badly, end to end in subprocesses against loopback servers: exit codes, a
SIGKILLed run, a full disk, an echoed key, bad bounds, a wrong model (docs/driver.md, "How a run
ends" and "Exit codes")."""

import asyncio
import os
import signal
import subprocess
import sys

import orjson
import pytest

from harness.trace.native import write_trace
from tests.driver.helpers import load_manifest, sess, trace
from tests.waits import HANG_S

KEY = "sk-echo-me-not-31337"


async def _harness(*args, env=None, timeout=HANG_S):
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "harness",
        *map(str, args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()


def _trace(tmp_path, sessions, name="trace.jsonl"):
    path = tmp_path / name
    write_trace(trace(*sessions), path)
    return path


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error:"), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.slow
async def test_a_run_where_every_request_fails_exits_non_zero(server, tmp_path):
    path = _trace(tmp_path, [sess(f"fault-http500-{i}", [(8, 3, 0)] * 2) for i in range(3)])
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"name: allfail\nworkload: {{trace: {path}}}\n"
        f"target: {{kind: endpoints, endpoints: [{{url: '{server.url}'}}], model: m}}\n"
        "load: {concurrency: 3}\n"
    )
    code, out, err = await _harness("run", scenario, "-o", tmp_path / "run", "--quiet")
    assert code == 1, err
    assert "no measured request succeeded (6 of 6 failed)" in err


@pytest.mark.slow
async def test_replay_exit_codes_follow_the_table(server, tmp_path):
    ok = _trace(tmp_path, [sess("a", [(8, 3, 0)] * 2), sess("fault-http500-b", [(8, 3, 0)] * 2)])
    base = ("replay", ok, "--endpoint", server.url, "--model", "m", "--quiet")
    code, _, err = await _harness(*base, "-o", tmp_path / "r1")
    assert code == 0, err  # half failed: under the default threshold (all)
    code, _, err = await _harness(*base, "-o", tmp_path / "r2", "--max-failures", "0.25")
    assert code == 1 and "above --max-failures 0.25" in err, err
    code, _, err = await _harness(*base, "-o", tmp_path / "r3", "--warmup-requests", "10")
    assert code == 1 and "measured window is empty" in err, err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-o", "FILE"], "names a file"),
        (["--header", "X-Evil: a\r\nX-Injected: b"], "one line"),
        (["--concurrency", "100000"], "100000 concurrent sessions"),
        (["--endpoint", "localhost:8000"], "add http://"),
        (["--max-duration", "10", "--warmup", "6", "--cooldown", "4"], "cover the whole run"),
    ],
)
@pytest.mark.slow
async def test_bad_bounds_are_one_line_exit_2(server, tmp_path, extra, message):
    path = _trace(tmp_path, [sess(f"s{i}", [(8, 3, 0)]) for i in range(3)])
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    extra = [str(a_file) if e == "FILE" else e for e in extra]
    args = ["replay", path, "--endpoint", server.url, "--model", "m", "--quiet"]
    if "-o" not in extra:
        args += ["-o", tmp_path / "run"]
    code, _, err = await _harness(*args, *extra)
    assert code == 2 and message in _one_error_line(err), err


@pytest.mark.slow
async def test_an_echoed_key_is_not_in_the_run_folder(server, tmp_path):
    path = _trace(tmp_path, [sess("good", [(8, 3, 0)]), sess("fault-echoauth-x", [(8, 3, 0)])])
    run = tmp_path / "run"
    code, out, err = await _harness(
        "replay", path, "--endpoint", server.url, "--model", "m", "-o", run, "--quiet",
        "--api-key-env", "ECHO_KEY", env={"ECHO_KEY": KEY},
    )  # fmt: skip
    assert code == 0, err
    assert any(KEY in (e["authorization"] or "") for e in server.log)  # the server saw it
    echoed = (run / "records.jsonl").read_text()
    assert "HTTP401" in echoed and "invalid credentials" in echoed and "<redacted>" in echoed
    for f in run.rglob("*"):
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f
    assert KEY not in out + err


@pytest.mark.slow
async def test_analyze_of_a_sigkilled_run_says_it_was_cut_short(make_server, tmp_path):
    srv = await make_server(token_delay=0.02)
    path = _trace(tmp_path, [sess(f"s{i}", [(8, 40, 0)] * 20) for i in range(4)])
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "replay", str(path), "--endpoint", srv.url,
         "--model", "m", "--concurrency", "4", "-o", str(run), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    records = run / "records.jsonl"
    while not (records.exists() and records.stat().st_size) and proc.poll() is None:
        await asyncio.sleep(0.05)  # until a record is written (pytest's timeout bounds a hang)
    assert proc.poll() is None, "the run ended before it wrote a record"
    proc.send_signal(signal.SIGKILL)
    proc.wait(HANG_S)
    assert load_manifest(run)["status"] == "running"
    code, out, err = await _harness("analyze", run)
    assert "crashed / not closed" in err and "cut short" in err, err
    code, out, err = await _harness("compare", run, run, "--fail-on", "ttft_p90:+10%")
    errors = [line for line in err.splitlines() if line.startswith("harness: error:")]
    assert code == 2 and len(errors) == 1 and "a gate does not judge it" in errors[0], err
    code, out, err = await _harness("compare", run, run)
    assert code == 4 and "crashed / not closed" in out, out  # one run a side: inconclusive
    code, out, err = await _harness("report", run)
    assert code == 0 and "crashed / not closed" in (run / "report.html").read_text(), err
    trend = tmp_path / "trend.html"
    code, out, err = await _harness("report", "--trend", run, run, "-o", trend)
    assert "ended badly: run: crashed / not closed" in out + err, out + err
    assert "crashed / not closed" in trend.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
@pytest.mark.slow
async def test_a_full_disk_stops_the_run_with_one_line(make_server, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        srv = await make_server(token_delay=0.0005)
        path = _trace(tmp_path, [sess(f"s{i}", [(8, 4, 0)] * 400) for i in range(8)])
        run = mnt / "run"
        code, out, err = await _harness(
            "replay", path, "--endpoint", srv.url, "--model", "m", "--concurrency", "8",
            "-o", run, "--quiet",
        )  # fmt: skip
        assert code == 2 and "Traceback" not in err, err
        assert "cannot write" in err and len(err.strip().splitlines()) <= 3, err
        kept = len((run / "records.jsonl").read_bytes().splitlines())
        served = len(srv.log) - 1  # the preflight's probe
        manifest = load_manifest(run)
        print(f"server saw {served}, kept {kept}, lost {served - kept}; {manifest['status']}")
        assert served - kept <= 8 + manifest.get("records_lost", 0)  # in flight + the last batch
        assert (manifest["status"], manifest["stopped_by"]) == ("failed", "disk_full")
        assert not list(run.glob("*.tmp"))
        code, _, err = await _harness("analyze", run)  # summary.json cannot be written either
        errors = [line for line in err.splitlines() if line.startswith("harness: error:")]
        assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
        assert not list(run.glob("*.tmp"))  # no 0-byte summary.json.tmp (nor any other)
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def _serve(*flags):
    """A `harness serve` on an ephemeral loopback port: (process, base URL)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "serve", "--port", "0", *(flags or ("--preset", "tiny"))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if "serving on " in line:
            return proc, line.split("serving on ", 1)[1].split()[0]
    proc.kill()
    raise AssertionError("harness serve did not start")


@pytest.mark.slow
async def test_replay_of_a_model_not_served_stops_at_once_naming_the_served_one(server, tmp_path):
    """At once: the preflight's /models answer stops the run before any request is sent, the
    preflight's own probe included (a server that answers a wrong model with a 404 would name
    itself too, but only after a request; this server would serve any model)."""
    path = _trace(tmp_path, [sess("a", [(8, 3, 0)])])
    code, _, err = await _harness(
        "replay", path, "--endpoint", server.url, "--model", "no-such-model", "-o", tmp_path / "r"
    )
    line = _one_error_line(err)
    assert code == 2, (code, err)
    assert "no-such-model" in line and "serves: m, test-model" in line, line
    assert server.log == []  # not one request: neither the probe nor the trace's


@pytest.mark.slow
async def test_serve_model_name_answers_to_it_and_lists_it(tmp_path):
    import aiohttp

    proc, url = _serve("--model", "small")
    try:
        async with aiohttp.ClientSession() as s, s.get(f"{url}/v1/models") as r:
            ids = [m["id"] for m in (await r.json())["data"]]
        assert ids == ["small"]
        path = _trace(tmp_path, [sess("a", [(8, 3, 0)])])
        code, _, err = await _harness(
            "replay", path, "--endpoint", url, "--model", "small", "-o", tmp_path / "r", "--quiet"
        )
        assert code == 0, err
    finally:
        proc.terminate()
        proc.wait(HANG_S)


def test_endpoint_paths_with_or_without_v1_keep_their_query_string():
    from harness.driver.http.config import endpoint_url

    assert (
        endpoint_url("http://h:1/v1?api_key=X", "chat")
        == "http://h:1/v1/chat/completions?api_key=X"
    )
    assert endpoint_url("http://h:1?k=1", "completions") == "http://h:1/v1/completions?k=1"
    assert (
        endpoint_url("http://h:1/v1/completions?k=1", "chat", "/models")
        == "http://h:1/v1/models?k=1"
    )


@pytest.mark.slow
async def test_a_key_in_the_endpoints_query_string_reaches_the_server_and_no_file(server, tmp_path):
    path = _trace(tmp_path, [sess("a", [(8, 3, 0)]), sess("fault-http500-b", [(8, 3, 0)])])
    run = tmp_path / "run"
    url = f"{server.url}/v1?api_key={KEY}"
    code, out, err = await _harness(
        "replay", path, "--endpoint", url, "--model", "m", "-o", run, "--quiet"
    )
    assert code == 0, err
    seen = [(e["path"], e["query"]) for e in server.log]
    assert seen == [("/v1/completions", f"api_key={KEY}")] * 3  # the probe, then 2
    for f in run.rglob("*"):
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f
    assert KEY not in out + err


@pytest.mark.slow
async def test_validate_only_loads_the_tokenizer(server, tmp_path):
    bad = tmp_path / "tok"
    bad.mkdir()
    (bad / "tokenizer.json").write_text("{not a tokenizer")
    path = _trace(tmp_path, [sess("a", [(8, 3, 0)])])
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"name: tok\nworkload: {{trace: {path}, tokenizer: {bad}}}\n"
        f"target: {{kind: endpoints, endpoints: [{{url: '{server.url}'}}], model: m}}\n"
    )
    code, _, err = await _harness("run", scenario, "--validate-only")
    assert code == 2 and "tokenizer" in _one_error_line(err), err


@pytest.mark.slow
async def test_max_duration_says_what_was_unsent_and_its_cancellations_are_not_failures(
    make_server, tmp_path
):
    srv = await make_server(token_delay=0.01)
    path = _trace(tmp_path, [sess(f"s{i}", [(8, 50, 0)] * 10) for i in range(2)])
    run = tmp_path / "run"
    code, out, err = await _harness(
        "replay", path, "--endpoint", srv.url, "--model", "m", "-o", run, "--quiet",
        "--max-duration", "1.5", "--drain", "0", "--no-cycle-trace", "--concurrency", "2",
    )  # fmt: skip
    assert code == 0, err
    manifest = load_manifest(run)
    assert manifest["stopped_by"] == "max_duration" and manifest["unsent_requests"] > 0
    assert f"{manifest['unsent_requests']} of the trace's requests unsent" in err
    code, out, err = await _harness("analyze", run, "--json")
    summary = orjson.loads(out)
    assert summary["requests_cancelled"] == 2 and summary["requests_failed"] == 0
    # a stop the run was told to make is an ending, not a warning; the unsent count is information
    # (a busy host may make the client self-check warn that the loop ran late: not this test's)
    assert summary["run_end"]["note"] is None
    assert [w for w in summary["warnings"] if not w.startswith("client: ")] == []
    assert summary["run_end"]["unsent_requests"] == manifest["unsent_requests"]


@pytest.mark.slow
async def test_concurrency_above_ulimit_n_is_refused(server, tmp_path):
    path = _trace(tmp_path, [sess(f"s{i}", [(8, 3, 0)]) for i in range(3)])
    args = ["replay", path, "--endpoint", server.url, "--model", "m", "-o", tmp_path / "r"]
    proc = subprocess.run(
        ["bash", "-c", 'ulimit -n 256 && exec "$@"', "_", sys.executable, "-m", "harness",
         *map(str, args), "--concurrency", "250"],
        capture_output=True, text=True, timeout=HANG_S,
    )  # fmt: skip
    assert proc.returncode == 2 and "ulimit -n" in _one_error_line(proc.stderr), proc.stderr


@pytest.mark.parametrize(
    ("status", "total", "failed", "code", "line"),
    [
        ("partial", 40, 3, 3, "the run is partial: a load worker was lost"),
        ("partial", 40, 0, 3, "the run is partial"),  # lost between requests: nothing failed
        ("running", 40, 0, 3, "the run is running"),
        ("interrupted", 40, 0, 130, "interrupted"),
        ("complete", 40, 40, 1, "no measured request succeeded (40 of 40 failed)"),
        ("complete", 0, 0, 1, "the measured window is empty"),
        ("complete", 40, 39, 0, None),
    ],
)
def test_each_ending_maps_to_its_exit_code_as_the_cli_prints_it(
    capsys, status, total, failed, code, line
):
    """The function both verbs end with (`harness run` takes the worst over its points): a Ray
    run that lost a worker exits 3 whatever its requests did."""
    from harness.app.commands.run import _exit

    assert _exit(status, total, failed, 1.0) == code
    err = capsys.readouterr().err
    if line is None:
        assert err == ""
    else:
        assert err.startswith(f"harness: exit {code}: ") and line in err and err.count("\n") == 1
