"""The Ray runs of tests/test_distributed.py, in one process and one local Ray cluster (starting
Ray takes ~10 s, so it starts once). Run ONLY inside a loopback-only namespace (netns.py):

    unshare -n sh -c 'ip link set lo up && exec python -m tests.distributed.ray_runs OUT'  (repo root)

Writes run folders under OUT and OUT/results.json; the tests check them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import ray

from harness.distributed import run_replay_distributed
from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.replay_into import run_replay
from harness.driver.target import Timeouts
from harness.errors import TargetError
from harness.schema import RECORDS_FILE
from harness.trace.native import write_trace
from tests.distributed.traces import small_trace
from tests.driver.sse_server import ServerConfig, SSETestServer
from tests.waits import HANG_S


class ServerThread:
    """The SSE test server on its own event loop, so a busy coordinator cannot delay it."""

    def __init__(self, config: ServerConfig) -> None:
        self.server = SSETestServer(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> SSETestServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(HANG_S)
        return self.server

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(HANG_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(HANG_S)


def http_config(url: str) -> HTTPTargetConfig:
    timeouts = Timeouts(connect=5, ttft=10, idle=10, total=30)
    return HTTPTargetConfig(
        endpoints=(url,), model="test-model", timeouts=timeouts, api_key="sk-SECRET-never-written"
    )


def as_dict(result) -> dict:
    return dataclasses.asdict(result)


async def equivalence(server: SSETestServer, out: Path) -> dict:
    """The same closed-loop and open-loop trace, single process and on 2 workers. The server's
    receive times (perf_counter: one clock for every process on this machine) of the last run
    are kept, so the tests can put records from every worker on the server's clock."""
    tr, tc = small_trace(), http_config(server.url)
    write_trace(tr, out / "small.trace.jsonl")
    closed = ReplayConfig(load="closed", concurrency=4, run_id="closed")
    opened = ReplayConfig(load="open", session_rate=25.0, seed=3, run_id="open")
    res = {}
    for name, config in (("closed", closed), ("open", opened)):
        res[f"{name}_local"] = as_dict(
            await run_replay(tr, HTTPTarget(tc), config, out / f"{name}-local")
        )
        server.log.clear()
        res[f"{name}_ray"] = as_dict(
            await run_replay_distributed(
                tr,
                tc,
                config,
                out / f"{name}-ray",
                workers=2,
                trace_path=out / "small.trace.jsonl",
                manifest_extra={"scenario": "test"},
            )
        )
    res["server_recv"] = {e["request_id"]: e["t_recv"] for e in server.log}
    return res


async def worker_loss(url: str, out: Path) -> dict:
    """Kill worker 0 once a few records are in; the run must finish and say so."""
    tr = small_trace(mains=12, turns=5, output=30)
    config = ReplayConfig(load="closed", concurrency=6, run_id="loss")
    run_dir = out / "loss"
    task = asyncio.create_task(
        run_replay_distributed(tr, http_config(url), config, run_dir, workers=2)
    )
    records = run_dir / RECORDS_FILE
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and not task.done():
        if records.exists() and len(records.read_bytes().splitlines()) >= 6:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # the next turns (0.3 s each) are sent and announced by now
    victim = next(
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("harness:loss:") and a["name"].endswith("worker-0")
    )
    ray.kill(ray.get_actor(victim))
    killed_at = len(records.read_bytes().splitlines())
    return {"loss": as_dict(await task), "records_at_kill": killed_at}


async def interrupted(url: str, out: Path) -> dict:
    """SIGINT to the coordinator mid-run: workers stop, in-flight requests end `cancelled`."""
    tr = small_trace(mains=8, turns=5, output=30)
    config = ReplayConfig(load="closed", concurrency=4, run_id="sigint")
    task = asyncio.create_task(
        run_replay_distributed(tr, http_config(url), config, out / "sigint", workers=2)
    )
    records = out / "sigint" / RECORDS_FILE
    while not task.done() and not (records.exists() and records.stat().st_size > 0):
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    os.kill(os.getpid(), signal.SIGINT)
    return {"sigint": as_dict(await task)}


async def bounded(url: str, out: Path) -> dict:
    """max_duration on every worker, from the shared start: sending stops at 1 s on one clock."""
    config = ReplayConfig(
        load="closed", concurrency=4, max_duration=1.0, drain_s=0.1, run_id="bounded"
    )
    tr = small_trace(mains=12, turns=6, output=30)
    return {
        "bounded": as_dict(
            await run_replay_distributed(tr, http_config(url), config, out / "bounded", workers=2)
        )
    }


async def unreachable(out: Path) -> dict:
    """Nothing listens at the endpoint: the run fails with the target's one-line error."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        await run_replay_distributed(
            small_trace(mains=2),
            http_config(f"http://127.0.0.1:{port}"),
            ReplayConfig(run_id="down"),
            out / "down",
            workers=2,
        )
    except TargetError as exc:
        return {"unreachable_error": str(exc)}
    return {"unreachable_error": None}


def scenario_run(url: str, out: Path) -> dict:
    """`harness run` with execution.backend ray, end to end (analysis and report included)."""
    from harness.app.runner import run_scenario
    from harness.app.scenario import load_scenario

    path = out / "scenario.yaml"
    path.write_text(f"""
name: ray-e2e
workload: {{trace: {out / "small.trace.jsonl"}}}
target: {{kind: endpoints, endpoints: [{{url: {url}/v1}}], model: test-model, api: chat,
         scrape_metrics: false}}
load: {{mode: closed, concurrency: 4}}
execution: {{backend: ray, workers: 2}}
""")
    result = run_scenario(load_scenario(path), out=out / "e2e", quiet=True)
    return {"e2e_status": result.points[0].status}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    timings = {
        "ray_init_s": time.perf_counter() - t,
        "node_ip": ray.util.get_node_ip_address(),
        "interfaces": [name for _, name in socket.if_nameindex()],
        # Ray's logs and spill files: the tests check the API key is not there either
        "ray_session_dir": ray._private.worker._global_node.get_session_dir_path(),
    }
    try:
        with ServerThread(ServerConfig(token_delay=0.002)) as server:
            results = asyncio.run(equivalence(server, out))
            results.update(scenario_run(server.url, out))
        with ServerThread(ServerConfig(token_delay=0.01)) as server:
            results.update(asyncio.run(worker_loss(server.url, out)))
            results.update(asyncio.run(interrupted(server.url, out)))
            results.update(asyncio.run(bounded(server.url, out)))
        results.update(asyncio.run(unreachable(out)))
    finally:
        ray.shutdown()
    results.update(timings, total_s=time.perf_counter() - t)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
