"""A cycled soak: does the driver's memory stay flat over a long closed-loop run?

    .venv/bin/python benchmarks/soak.py [--duration 1800] [--concurrency 256] [--sample-s 5]
                                        [--settle-s 60] [--tracemalloc 60] [--keep DIR]
                                        [--json FILE]

It draws a trace (workloads/agentx-cpu.yaml, 64 main sessions: ~5.3k requests a pass), starts
the zero-delay SSE server of bench_driver.py in its own process (no prefix memory, no bodies
kept; the script empties its request log at every sample, so the server's memory stays flat
too, and counts what it saw), and runs `harness replay` on it in another process, in closed
loop at `--concurrency` for `--duration` seconds with `--think-cap 0.001`: the trace is cycled, a
fresh salt per pass, so sessions, prompts and request ids never repeat. Every `--sample-s` it
reads the driver's resident set (VmRSS of /proc/PID/status).

Printed: the RSS series, the least-squares slope (KB/s) over the samples after `--settle-s` and
over each half of them (a leak climbs in both halves; a settling allocator only in the first),
the records written against the requests the server saw, and the command it ran.

`--tracemalloc S` starts tracemalloc in the driver S seconds into the run (slower from then on:
fewer requests), takes a baseline S seconds later and writes, every S seconds, the top growth by
traceback since the baseline (each snapshot after a full collection) to
`tracemalloc.txt` in the run folder: what the growing objects are.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import local_server
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "driver" / "sse_server.py"
PROFILE = ROOT / "workloads" / "agentx-cpu.yaml"


def vm_rss_kb(pid: int) -> int | None:
    """The process's resident set in KB; None once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def slope_kb_s(series: list[tuple[float, int]]) -> float:
    """Least-squares slope of RSS (KB) over time (s)."""
    if len(series) < 3:
        return float("nan")
    t, kb = np.array(series, dtype=float).T
    return float(np.polyfit(t, kb, 1)[0])


def drain_server_log(url: str) -> int:
    """The requests the server logged since the last call (its log emptied)."""
    with urllib.request.urlopen(f"{url}/log?clear=1", timeout=30) as resp:
        return len(json.loads(resp.read()))


def replay_command(trace: Path, run_dir: Path, url: str, args) -> list[str]:
    flags = ["--endpoint", url, "--model", "m", "--concurrency", str(args.concurrency)]
    flags += [
        "--max-duration",
        str(args.duration),
        "--think-cap",
        "0.001",
        "--quiet",
        "--drain",
        "5",
    ]
    cli = ["-m", "harness", "replay", str(trace), "-o", str(run_dir), *flags]
    if args.tracemalloc:
        return [sys.executable, __file__, "--child", str(args.tracemalloc), "--", *cli[2:]]
    return [sys.executable, "-P", *cli]


def child(every_s: float, cli_args: list[str]) -> int:
    """The driver with a thread that starts tracemalloc `every_s` into the run (tracing from the
    start would slow the run ~10x and count the loading), then writes the top growth since a
    baseline every `every_s` seconds."""
    import gc
    import threading
    import tracemalloc

    from harness.app.cli import main

    out = Path(cli_args[cli_args.index("-o") + 1]) / "tracemalloc.txt"

    def snapshot() -> tracemalloc.Snapshot:
        gc.collect()  # garbage awaiting a full collection is not growth
        return tracemalloc.take_snapshot()

    def watch() -> None:
        time.sleep(every_s)
        tracemalloc.start(6)
        time.sleep(every_s)  # the baseline holds what is in flight, as every later snapshot does
        first, t0 = snapshot(), time.monotonic()
        while True:
            time.sleep(every_s)
            top = snapshot().compare_to(first, "traceback")[:10]
            with out.open("a") as fh:
                fh.write(f"==== +{time.monotonic() - t0:.0f}s of tracing\n")
                for stat in top:
                    fh.write(f"{stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} blocks\n")
                    fh.write("\n".join(stat.traceback.format(limit=6)) + "\n")

    threading.Thread(target=watch, daemon=True).start()
    return main(cli_args)


def soak(args) -> dict:
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="soak-"))
    work.mkdir(parents=True, exist_ok=True)
    trace, run_dir = work / "trace.jsonl", work / "run"
    gen = ["-m", "harness", "trace", "generate", "--profile", str(PROFILE), "--sessions", "64"]
    subprocess.run([sys.executable, "-P", *gen, "-o", str(trace)], check=True, cwd=ROOT)
    server, url = local_server.start_server(SERVER, "--no-body", "--no-prefix-cache")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = replay_command(trace, run_dir, url, args)
    try:
        driver = subprocess.Popen(cmd, cwd=work, env=env)
        series, served = sample(driver, url, args.sample_s)
        served += drain_server_log(url)
    finally:
        server.kill()
        server.wait()
    if not (run_dir / "records.jsonl").is_file():
        raise SystemExit(f"the driver wrote no records (exit {driver.returncode})")
    records = sum(1 for _ in (run_dir / "records.jsonl").open("rb"))
    return summary(
        series, args.settle_s, args.duration, records, served, driver.returncode, cmd, run_dir
    )


def sample(driver: subprocess.Popen, url: str, every_s: float) -> tuple[list, int]:
    """(run time s, RSS KB) every `every_s` until the driver exits; the server's request count."""
    t0, series, served = time.monotonic(), [], 0
    while driver.poll() is None:
        kb = vm_rss_kb(driver.pid)
        if kb and driver.poll() is None:  # 0 between fork and exec
            series.append((round(time.monotonic() - t0, 1), kb))
        served += drain_server_log(url)
        time.sleep(max(0.0, every_s - (time.monotonic() - t0) % every_s))
    return series, served


def summary(series, settle_s, duration, records, served, rc, cmd, run_dir) -> dict:
    steady = [(t, kb) for t, kb in series if settle_s <= t <= duration]
    half = len(steady) // 2
    return {
        "command": shlex.join(cmd),
        "exit_code": rc,
        "run_dir": str(run_dir),
        "records": records,
        "server_requests": served,
        "rss_kb": series,
        "slope_kb_s": slope_kb_s(steady),
        "slope_first_half_kb_s": slope_kb_s(steady[:half]),
        "slope_second_half_kb_s": slope_kb_s(steady[half:]),
        "rss_steady_min_max_kb": [min(kb for _, kb in steady), max(kb for _, kb in steady)]
        if steady
        else None,
    }


def show(s: dict, settle_s: float) -> None:
    print(f"command: {s['command']}  (exit {s['exit_code']})")
    print("RSS (s: MB): " + ", ".join(f"{t:.0f}: {kb / 1024:.1f}" for t, kb in s["rss_kb"]))
    print(
        f"slope after {settle_s:g}s: {s['slope_kb_s']:+.2f} KB/s (halves: "
        f"{s['slope_first_half_kb_s']:+.2f}, {s['slope_second_half_kb_s']:+.2f} KB/s); "
        f"steady RSS {s['rss_steady_min_max_kb']} KB"
    )
    print(f"records {s['records']}, server requests {s['server_requests']} -> {s['run_dir']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--settle-s", type=float, default=60.0, help="samples before it not fitted")
    ap.add_argument("--tracemalloc", type=float, metavar="S", help="top growth every S seconds")
    ap.add_argument("--keep", metavar="DIR", help="work folder (default: a fresh temporary one)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--child", type=float, help=argparse.SUPPRESS)
    ap.add_argument("cli", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        sys.exit(child(args.child, args.cli[1:] if args.cli[:1] == ["--"] else args.cli))
    s = soak(args)
    show(s, args.settle_s)
    if args.json:
        Path(args.json).write_text(json.dumps(s, indent=1))


if __name__ == "__main__":
    main()
