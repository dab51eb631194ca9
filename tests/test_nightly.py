"""The README's nightly recipe, as its script `scenarios/nightly.sh`, played for three nights against
a server in another process (`harness serve --runner simulated`, the shape of a nightly against a
remote endpoint): night 1 records the history and exits 0, night 2 (the same server, one earlier
night) is `inconclusive` and the script passes with a warning, night 3 (the server restarted with
every step 10x longer) is `regressed`, exit 1: judged night against night, two earlier nights
that agree call a change that large."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scenarios" / "nightly.sh"
# Sized for a test: the CPU profile, 3 s runs, runs kept whatever their CPU waits (the recipe is
# under test, not the screen; a run whose CPU time was stolen is still left out, so a night may
# need a few more runs). Night 2 cannot be a false alarm: one earlier night decides nothing.
SIZED = (
    "--set workload.profile=workloads/agentx-cpu.yaml --set workload.sessions=4 "
    "--set load.concurrency=4 --set load.max_duration_s=3 --set load.warmup_s=0 "
    "--set load.cooldown_s=0 --min-runs 2 --max-runs 6 --max-wait-share 1"
)


def serve(*flags: str) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "harness", "serve", "--runner", "simulated", "--port", "0"]
    proc = subprocess.Popen([*cmd, *flags], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("serving on "):
            return proc, line.removeprefix("serving on ").strip()
    raise AssertionError(f"harness serve ended ({proc.wait()}) before it served")


def night(where: Path, n: int, url: str) -> tuple[int, dict, str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "NIGHT": f"2026-12-0{n}",
        "MODEL": "agentic-harness-reference",
        "ENDPOINT": f"{url}/v1",
        "NIGHTLY_SET": SIZED,
    }
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=where, env=env, capture_output=True, text=True, timeout=600
    )
    gate = where / "results" / f"nightly-2026-12-0{n}" / "gate.json"
    assert gate.is_file(), done.stdout + done.stderr
    return done.returncode, json.loads(gate.read_text()), done.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A checkout's layout: the scenarios and workloads the recipe names, results/ its own."""
    for name in ("scenarios", "workloads"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


@pytest.mark.slow
@pytest.mark.timeout(900)  # 6 to 18 runs of 3 s and their start-up: minutes on a busy host
def test_three_nights_recorded_passed_and_regressed(workdir):
    proc, url = serve()
    try:
        code1, gate1, out1 = night(workdir, 1, url)
        code2, gate2, out2 = night(workdir, 2, url)
    finally:
        proc.terminate()
        proc.wait()
    proc, url = serve("--step-time-scale", "10")  # tonight's server is slower
    try:
        code3, gate3, out3 = night(workdir, 3, url)
    finally:
        proc.terminate()
        proc.wait()
    assert (code1, gate1["verdict"]) == (0, "history recorded"), out1
    assert "first run of this history" in out1 and "nightly: passed" in out1
    assert (code2, gate2["verdict"], gate2["stopped_by"]) == (
        0, "inconclusive", "more nights needed"
    ), out2  # fmt: skip
    assert "::warning::nightly: inconclusive" in out2
    assert gate2["judgement"]["why_inconclusive"].startswith("one earlier night"), out2
    night1 = {f"nightly-2026-12-01-{Path(r['path']).name}" for r in gate1["runs"]}
    assert set(gate2["judgement"]["baseline"]) <= night1  # night 1's runs, screened
    assert gate3["judgement"]["by_night"] and "between 2+1 nights" in out3 + json.dumps(gate3)
    assert (code3, gate3["verdict"]) == (1, "regressed"), out3
    assert "::error::nightly: REGRESSED" in out3
    assert re.search(r"gate: 1 of at most 2 runs, at most ~[\d.]+ min left", out3)
    assert "gate: 2 of at most 2 runs, done" in out3  # the one look: min_runs usable runs


def test_the_readme_shows_the_script_as_it_is():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```bash\n{SCRIPT.read_text(encoding='utf-8')}```" in readme


@pytest.mark.slow  # one harness start-up, a few seconds
def test_a_pasted_copy_returns_to_its_shell(workdir):
    # bad input (exit 2 before any run): the shell the block was pasted into goes on
    pasted = SCRIPT.read_text(encoding="utf-8") + 'echo "shell still here: $?"\n'
    env = {**os.environ, "MODEL": "m", "NIGHTLY_SET": "--set load.concurrency=many"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "-c", pasted], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )
    assert "shell still here: 2" in done.stdout, done.stdout + done.stderr
