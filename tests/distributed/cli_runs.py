"""`harness run --workers 2` through the real CLI, for tests/test_distributed.py: started from a
folder that holds a decoy `harness` package (it must shadow nothing in the Ray workers), and one
worker killed mid-run (the run is `partial`: exit 3, one line). Run ONLY inside a loopback-only
namespace (netns.py), from the repo root:

    unshare -n sh -c 'ip link set lo up && exec python -m tests.distributed.cli_runs OUT'

Writes OUT/results.json (the exit code, stderr, the worker killed); the run folder is OUT/run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.schema import RECORDS_FILE
from harness.trace.native import write_trace
from tests.distributed.ray_runs import ServerThread
from tests.distributed.traces import small_trace
from tests.driver.sse_server import ServerConfig
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
DECOY = "raise ImportError('the decoy harness package was imported')\n"


def descendants_named(root: int, name: str) -> list[int]:
    """Processes below `root` whose command line holds `name` (Ray titles an actor's process
    `ray::<class>`)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
    found = []
    for pid in parent:
        p = pid
        while p in parent and p not in (root, 0, 1):
            p = parent[p]
        if p == root and pid != root:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if name.encode() in fh.read():
                    found.append(pid)
    return found


def scenario(out: Path, url: str) -> Path:
    write_trace(small_trace(mains=12, turns=5, output=30), out / "trace.jsonl")
    path = out / "scenario.yaml"
    path.write_text(f"""
name: ray-cli
workload: {{trace: {out / "trace.jsonl"}}}
target: {{kind: endpoints, endpoints: [{{url: {url}/v1}}], model: test-model, api: chat,
         scrape_metrics: false}}
load: {{mode: closed, concurrency: 6}}
""")
    return path


def kill_a_worker(proc: subprocess.Popen, records: Path) -> int | None:
    """SIGKILL one Ray worker once a few records are in; its pid (None if none was found)."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and proc.poll() is None:
        if records.exists() and len(records.read_bytes().splitlines()) >= 6:
            victims = descendants_named(proc.pid, "ReplayWorker")
            if victims:
                os.kill(victims[0], signal.SIGKILL)
                return victims[0]
        time.sleep(0.05)
    return None


def main(out: Path) -> None:
    cwd = out / "cwd"
    (cwd / "harness").mkdir(parents=True)
    (cwd / "harness" / "__init__.py").write_text(DECOY)
    with ServerThread(ServerConfig(token_delay=0.01)) as server:
        cmd = [sys.executable, "-P", "-m", "harness", "run", str(scenario(out, server.url))]
        cmd += ["-o", str(out / "run"), "--quiet", "--workers", "2"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
        killed = kill_a_worker(proc, out / "run" / RECORDS_FILE)
        _, err = proc.communicate(timeout=HANG_S)
    results = {"exit_code": proc.returncode, "stderr": err, "killed": killed}
    (out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
