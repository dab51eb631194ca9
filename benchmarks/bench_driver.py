"""Driver capacity and timing accuracy, each beside a minimal raw aiohttp reader in the same run.

    .venv/bin/python benchmarks/bench_driver.py [--duration 6] [--concurrency 64 256 1024]
                                                 [--output-tokens 256] [--repeats 1] [--pin]
                                                 [--token-delay 0] [--json FILE]

A zero-delay SSE server (tests/driver/sse_server.py) runs in its own process. For each
concurrency, two clients run in turn, each in a fresh process so `time.process_time()` is its own:

- raw: N coroutines posting the same chat request and reading `resp.content.iter_any()` to the
  end, counting token events with `bytes.count` and stamping the first one (the practical floor
  of this stack);
- driver: `harness.driver.run_replay` in closed loop with N sessions in flight, parsing every
  event, stamping every chunk and writing records.jsonl.

Reported: streamed tokens/s, requests/s, client CPU µs per streamed token, the concurrency held
(time-weighted requests in flight after the first 10 % of the run), and timing accuracy from the
server's own stamps: client TTFT − server TTFT, and the lag of the client's first-token stamp
behind the server's send (both p50 / p99, µs). The machine is shared: numbers are noisy.

Capacity wants the zero-delay server; timing accuracy wants a server that is not saturated
(a saturated one queues requests before its handler starts, which no client can see):

    bench_driver.py --pin                                          # capacity
    bench_driver.py --pin --token-delay 0.02 --output-tokens 32    # timing accuracy
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "driver" / "sse_server.py"
PROMPT_WORDS = 64


def _held(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Time-weighted mean of requests in flight over [start, end]."""
    busy = sum(max(0.0, min(b, end) - max(a, start)) for a, b in intervals)
    return busy / (end - start)


# ---- clients (each runs in its own process) ------------------------------------------------------


async def raw_client(url: str, concurrency: int, duration: float, out_tokens: int) -> dict:
    import aiohttp

    body = orjson.dumps(
        {
            "model": "m",
            "max_tokens": out_tokens,
            "min_tokens": out_tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": " ".join(["word"] * PROMPT_WORDS)}],
        }
    )
    tokens, done, intervals, firsts = 0, 0, [], []
    conn = aiohttp.TCPConnector(limit=concurrency)
    session = aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None))
    t0 = time.perf_counter()

    async def worker(w: int) -> None:
        nonlocal tokens, done
        i = 0
        while True:
            rid, i = f"raw-{w}-{i}", i + 1
            headers = {"Content-Type": "application/json", "X-Harness-Request-ID": rid}
            t_sent, first = time.perf_counter(), None
            try:
                async with session.post(
                    url + "/v1/chat/completions", data=body, headers=headers
                ) as resp:
                    async for data in resp.content.iter_any():
                        k = data.count(b'"delta":{"content"')
                        if k and first is None:
                            first = time.perf_counter()
                        tokens += k
                done += 1
            finally:
                intervals.append((t_sent, time.perf_counter()))
                firsts.append((rid, t_sent, first))

    cpu0 = time.process_time()
    tasks = [asyncio.create_task(worker(w)) for w in range(concurrency)]
    await asyncio.sleep(duration)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - t0
    await session.close()
    return _summary(tokens, done, cpu, wall, intervals, t0, firsts)


async def driver_client(url: str, concurrency: int, duration: float, out_tokens: int) -> dict:
    from harness.driver.config import ReplayConfig
    from harness.driver.openai_http import HTTPTargetConfig, OpenAIHTTPTarget
    from harness.driver.run import run_replay
    from harness.trace.model import Session, Trace, TraceHeader, Turn

    n = concurrency + int(duration * 3000)  # more sessions than the run can use (< 3000 req/s)
    turn = (Turn(PROMPT_WORDS - 16, out_tokens, 0.0),)
    trace = Trace(
        TraceHeader(seed=1), tuple(Session(f"s{i}", 0.0, 16, "sys", turn) for i in range(n))
    )
    config = ReplayConfig(
        load="closed", concurrency=concurrency, max_duration=duration, drain_s=0, api="chat",
        run_id="bench",
    )
    cpu_at_start: list[float] = []

    class Target(OpenAIHTTPTarget):
        async def start(self, check: bool = True) -> None:
            await super().start(check)
            # like the raw reader, count CPU from an open session (the one-off set-up of a run,
            # manifest, gc.freeze, TLS context, is not a per-token cost)
            cpu_at_start.append(time.process_time())

    target = Target(
        HTTPTargetConfig(endpoints=(url,), model="m", api="chat", max_connections=concurrency)
    )
    with tempfile.TemporaryDirectory() as tmp:
        await run_replay(trace, target, config, tmp)
        cpu = time.process_time() - cpu_at_start[0]
        manifest = orjson.loads((Path(tmp) / "manifest.json").read_bytes())
        recs = [
            orjson.loads(line) for line in (Path(tmp) / "records.jsonl").read_bytes().splitlines()
        ]
    t0 = manifest["t0_perf_counter"]
    tokens = sum(sum(r["chunk_tokens"]) for r in recs)
    done = sum(r["status"] == "ok" for r in recs)
    intervals = [(t0 + r["t_sent"], t0 + r["t_done"]) for r in recs]
    firsts = [
        (
            r["request_id"],
            t0 + r["t_sent"],
            t0 + r["t_first_token"] if r["t_first_token"] is not None else None,
        )
        for r in recs
    ]
    # Rates and the held-concurrency window use the run's own span (t0 .. last record).
    return _summary(
        tokens,
        done,
        cpu,
        manifest["duration_s"],
        intervals,
        t0,
        firsts,
        failed=sum(r["status"] in ("error", "timeout") for r in recs),
    )


def _summary(tokens, done, cpu, wall, intervals, t0, firsts, failed=0) -> dict:
    return {
        "tokens": tokens,
        "requests": done,
        "failed": failed,
        "cpu_s": cpu,
        "wall_s": wall,
        "held": _held(intervals, t0 + 0.1 * wall, t0 + wall),
        "firsts": firsts,
    }


# ---- the orchestrator -------------------------------------------------------------------------------


def _get_log(url: str) -> dict[str, dict]:
    with urllib.request.urlopen(url + "/log?clear=1", timeout=60) as resp:
        entries = orjson.loads(resp.read())
    return {e["request_id"]: e for e in entries if e["request_id"]}


def _accuracy(firsts: list, log: dict[str, dict]) -> dict:
    ttft_err, lag = [], []
    for rid, t_sent, t_first in firsts:
        e = log.get(rid)
        if e is None or t_first is None or e["t_first_token"] is None:
            continue
        ttft_err.append((t_first - t_sent) - (e["t_first_token"] - e["t_recv"]))
        lag.append(t_first - e["t_first_token"])
    pct = lambda xs, q: float(np.percentile(xs, q)) * 1e6 if xs else float("nan")  # noqa: E731
    return {
        "n": len(lag),
        "ttft_err_p50_us": pct(ttft_err, 50),
        "ttft_err_p99_us": pct(ttft_err, 99),
        "lag_p50_us": pct(lag, 50),
        "lag_p99_us": pct(lag, 99),
    }


def _run_client(role: str, url: str, c: int, args) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--client",
        role,
        "--url",
        url,
        "--concurrency",
        str(c),
        "--duration",
        str(args.duration),
        "--output-tokens",
        str(args.output_tokens),
    ]
    out = subprocess.run(
        cmd,
        capture_output=True,
        check=True,
        timeout=args.duration * 10 + 120,
        preexec_fn=_pin(args.pin, 1),
    ).stdout
    res = json.loads(out)
    res.update(_accuracy(res.pop("firsts"), _get_log(url)))
    res.update(
        role=role,
        concurrency=c,
        tok_s=res["tokens"] / res["wall_s"],
        req_s=res["requests"] / res["wall_s"],
        cpu_us_per_token=res["cpu_s"] / max(res["tokens"], 1) * 1e6,
    )
    return res


def _pin(enabled: bool, cpu: int):
    """With --pin, the server runs on CPU 0 and each client on CPU 1 (Linux)."""
    if not enabled or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, {cpu % (os.cpu_count() or 1)})


def _start_server(pin: bool, token_delay: float) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, str(SERVER), "--port", "0", "--no-body", "--no-prefix-cache"]
    proc = subprocess.Popen(
        [*cmd, "--token-delay", str(token_delay)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=_pin(pin, 0),
    )
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--output-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--pin", action="store_true", help="server on CPU 0, clients on CPU 1")
    ap.add_argument(
        "--token-delay",
        type=float,
        default=0.0,
        help="server seconds between tokens (0: capacity; e.g. 0.02 keeps the server unsaturated "
        "so TTFT error measures the client, not the server's queue)",
    )
    ap.add_argument("--client", choices=("raw", "driver"), help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    if args.client:
        fn = raw_client if args.client == "raw" else driver_client
        coro = fn(args.url, args.concurrency[0], args.duration, args.output_tokens)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None) as runner:
            print(json.dumps(runner.run(coro)))
        return
    server, url = _start_server(args.pin, args.token_delay)
    rows = []
    try:
        for c in args.concurrency:
            for _ in range(args.repeats):
                for role in ("raw", "driver"):
                    rows.append(_run_client(role, url, c, args))
                    _print_row(rows[-1])
    finally:
        server.terminate()
        server.wait(10)
    _print_ratios(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


def _print_row(r: dict) -> None:
    print(
        f"c={r['concurrency']:5d} {r['role']:6s} tok/s {r['tok_s']:9.0f}  req/s {r['req_s']:7.1f}  "
        f"cpu/token {r['cpu_us_per_token']:6.1f} us  held {r['held']:7.1f} ({r['held'] / r['concurrency']:.0%})  "
        f"ttft err p50/p99 {r['ttft_err_p50_us']:7.0f}/{r['ttft_err_p99_us']:7.0f} us  "
        f"lag p50/p99 {r['lag_p50_us']:7.0f}/{r['lag_p99_us']:7.0f} us  (n={r['n']}, failed={r['failed']})",
        flush=True,
    )


def _print_ratios(rows: list[dict]) -> None:
    print("\ndriver / raw (medians over repeats):")

    def get(c: int, role: str, key: str) -> float:
        return float(
            np.median([r[key] for r in rows if r["concurrency"] == c and r["role"] == role])
        )

    for c in sorted({r["concurrency"] for r in rows}):
        print(
            f"c={c:5d} cpu/token x{get(c, 'driver', 'cpu_us_per_token') / get(c, 'raw', 'cpu_us_per_token'):.2f}  "
            f"tok/s x{get(c, 'driver', 'tok_s') / get(c, 'raw', 'tok_s'):.2f}  "
            f"held {get(c, 'driver', 'held') / c:.0%} (raw {get(c, 'raw', 'held') / c:.0%})"
        )


if __name__ == "__main__":
    main()
