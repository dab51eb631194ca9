"""Driver capacity on Ray: the local backend beside 1 and 2 Ray workers, in the same run.

    .venv/bin/python benchmarks/bench_ray.py [--duration 5] [--concurrency 64 256]
                                             [--output-tokens 128] [--json FILE]

The script re-runs itself inside a loopback-only network namespace (`unshare -n`, then
`ip link set lo up`) before anything starts, so Ray binds 127.0.0.1 and nothing leaves the
machine. There it starts the zero-delay SSE server of bench_driver.py in its own process and a
local Ray cluster (`num_cpus=2`), then for each concurrency replays single-turn sessions in
closed loop for `--duration` seconds with:

- local: `harness.driver.replay_into.run_replay` in this process on asyncio's loop (as `harness run`);
- local-uvloop: the same on uvloop (as `harness replay`, and as Ray runs its async actors);
- ray-1: `run_replay_distributed` with one worker (Ray's cost for the same work: one actor,
  records shipped to the coordinator, which writes them);
- ray-2: two workers, the concurrency split between them.

Reported per row: streamed tokens/s and requests/s over the replay window, and `setup s`: the
time the call took beyond the replay itself (actor start, shard transfer, shared-start lead,
teardown; Ray's own start-up is excluded and printed once). Ratios are against `local-uvloop`
of the same concurrency (the same event loop as the workers', so the ratio is Ray's cost). The server is one process: on a small machine it, not the client, can be the
ceiling, and then a second worker cannot help. The machine may be shared: numbers are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import local_server
import orjson

from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.replay_into import event_loop_factory, run_replay
from harness.trace.model import Session, Trace, TraceHeader, Turn

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "driver" / "sse_server.py"  # the zero-delay server of bench_driver.py
PROMPT_WORDS = 64
MODES = ("local", "local-uvloop", "ray-1", "ray-2")
BASE = "local-uvloop"  # Ray's async actors run on uvloop when it is installed: the fair baseline


def ensure_loopback_only() -> None:
    """Re-exec under `unshare -n` unless this process already sees nothing but `lo`."""
    if [name for _, name in socket.if_nameindex()] == ["lo"]:
        return
    if shutil.which("unshare") is None:
        raise SystemExit("bench_ray.py keeps Ray on loopback with `unshare -n`: not installed")
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise SystemExit(f"bench_ray.py keeps Ray on loopback with `unshare -n`: {probe.stderr}")
    script = 'ip link set lo up && exec "$0" "$@"'
    os.execvp("unshare", ["unshare", "-n", "sh", "-c", script, sys.executable, *sys.argv])


def start_server() -> tuple[subprocess.Popen, str]:
    return local_server.start_server(SERVER, "--no-body", "--no-prefix-cache")


def bench_trace(concurrency: int, duration: float, out_tokens: int) -> Trace:
    n = int(concurrency * duration * 40) + 1000  # more sessions than the run can use
    turn = (Turn(PROMPT_WORDS - 16, out_tokens, 0.0),)
    sessions = tuple(Session(f"s{i}", 0.0, 16, "sys", turn) for i in range(n))
    return Trace(TraceHeader(seed=1), sessions)


async def one(mode: str, url: str, c: int, args) -> dict:
    from harness.distributed import run_replay_distributed

    trace = bench_trace(c, args.duration, args.output_tokens)
    config = ReplayConfig(
        load="closed",
        concurrency=c,
        max_duration=args.duration,
        drain_s=0,
        api="chat",
        run_id=f"bench-{mode}-{c}",
    )
    tc = HTTPTargetConfig(endpoints=(url,), model="m", api="chat", max_connections=c)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        if mode.startswith("local"):
            await run_replay(trace, HTTPTarget(tc), config, tmp)
        else:
            await run_replay_distributed(trace, tc, config, tmp, workers=int(mode[-1]))
        wall = time.perf_counter() - t
        manifest = orjson.loads((Path(tmp) / "manifest.json").read_bytes())
        recs = [orjson.loads(x) for x in (Path(tmp) / "records.jsonl").read_bytes().splitlines()]
    window = max(r["t_done"] for r in recs) - min(r["t_sent"] for r in recs)
    return {
        "mode": mode,
        "concurrency": c,
        "tok_s": sum(sum(r["chunk_tokens"]) for r in recs) / window,
        "req_s": sum(r["status"] == "ok" for r in recs) / window,
        "failed": sum(r["status"] in ("error", "timeout") for r in recs),
        "setup_s": wall - manifest["duration_s"],
        "workers": len(manifest.get("workers", [])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    ensure_loopback_only()
    import ray

    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(
        f"ray.init: {time.perf_counter() - t:.1f} s on {ray.util.get_node_ip_address()}; "
        f"{os.cpu_count()} CPUs on this machine",
        flush=True,
    )
    server, url = start_server()
    rows = []
    try:
        for c in args.concurrency:
            for mode in MODES:
                factory = event_loop_factory() if mode != "local" else None
                with asyncio.Runner(loop_factory=factory) as runner:
                    rows.append(runner.run(one(mode, url, c, args)))
                _print_row(rows[-1])
    finally:
        server.terminate()
        server.wait(10)
        ray.shutdown()
    _print_ratios(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


def _print_row(r: dict) -> None:
    print(
        f"c={r['concurrency']:5d} {r['mode']:12s} tok/s {r['tok_s']:9.0f}  req/s {r['req_s']:7.1f}  "
        f"setup {r['setup_s']:5.2f} s  failed {r['failed']}",
        flush=True,
    )


def _print_ratios(rows: list[dict]) -> None:
    print(f"\nagainst {BASE} of the same concurrency:")
    for r in rows:
        base = next(x for x in rows if x["concurrency"] == r["concurrency"] and x["mode"] == BASE)
        print(
            f"c={r['concurrency']:5d} {r['mode']:12s} tok/s x{r['tok_s'] / base['tok_s']:.2f}  "
            f"req/s x{r['req_s'] / base['req_s']:.2f}  setup {r['setup_s'] - base['setup_s']:+.2f} s"
        )


if __name__ == "__main__":
    main()
