"""Driver capacity and timing accuracy, each beside a minimal raw aiohttp reader in the same run.

    .venv/bin/python benchmarks/bench_driver.py [--duration 6] [--concurrency 64 256 1024]
                                                 [--output-tokens 256] [--repeats 1] [--pin]
                                                 [--token-delay 0] [--metrics] [--json FILE]
                                                 [--vllm-bench "vllm bench serve"]

A zero-delay SSE server (tests/driver/sse_server.py) runs in its own process. For each
concurrency, three clients run in turn, each in a fresh process so `time.process_time()` is its
own:

- raw: N coroutines posting the same chat request with aiohttp and reading
  `resp.content.iter_any()` to the end, counting token events with `bytes.count` and stamping the
  first one (the practical floor of a Python client on aiohttp, the reference the driver's goal
  is stated against);
- wire: the same, on the driver's own wire (harness/driver/http/wire.py: its pool, its
  connections, httptools), the body's bytes counted where they arrive: the floor of the driver's
  own transport, so the driver's cost beyond its transport shows too (`--no-wire` skips it);
- driver: `harness.driver.run_replay` in closed loop with N sessions in flight, parsing every
  event, stamping every chunk and writing records.jsonl;
- metrics (`--metrics`): the driver again with its live Prometheus metrics on (harness/export/:
  every finished record folded into the series), scraped by this process once a second while it
  runs; its CPU per token over the driver run beside it is the endpoint's cost. The two run in
  alternating order, repeat by repeat.

Reported: streamed tokens/s, requests/s, client CPU µs per streamed token, the concurrency held
(time-weighted requests in flight after the first 10 % of the run), and timing accuracy from the
server's own stamps: client TTFT − server TTFT, and the lag of the client's first-token stamp
behind the server's send (both p50 / p99, µs). The machine is shared: numbers are noisy (a
client's own CPU per token moves by a quarter from run to run, docs/driver.md), so with
`--repeats N` the summary also gives each driver run over the raw run just before it: the
pairs' median and range.

With `--vllm-bench CMD` a third client runs in turn: `vllm bench serve` (random dataset, prompts
of ~64 tokens, the same output length, `--max-concurrency N`, chat API, `--request-rate inf`,
as many prompts as the raw reader finished in the same time). It is skipped, with the reason
printed, when CMD is not installed or does not run. `vllm bench serve` spends ~10-30 s starting
(imports, tokenizer, dataset) and more after the run, so all three clients are judged alike from
outside: the parent samples each client process's CPU time (/proc/PID/stat, every 10 ms) and
counts CPU and streamed tokens over the load window the server saw (from when 2 % of the
requests had arrived to when 98 % had ended; tokens of requests cut by the window counted
pro rata). That is the "window" column: client CPU µs per streamed token while streaming.

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
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import local_server
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


def _chat_body(out_tokens: int) -> bytes:
    """The one request both raw readers send, over and over."""
    return orjson.dumps(
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


TOKEN_EVENT = b'"delta":{"content"'  # what the raw readers count, one per token event


async def _raw_loop(concurrency: int, duration: float, one) -> dict:
    """`concurrency` workers, each running `await one(request_id, tally)` back to back for
    `duration` seconds, where `one` adds each read's tokens to `tally[0]` as they arrive and puts
    the first token's time in `tally[1]` (a request cut at the end counts its tokens too, as the
    driver's records do); the raw readers' summary."""
    tokens, done, intervals, firsts = 0, 0, [], []
    t0 = time.perf_counter()

    async def worker(w: int) -> None:
        nonlocal tokens, done
        i = 0
        while True:
            rid, i = f"raw-{w}-{i}", i + 1
            t_sent, tally = time.perf_counter(), [0, None]
            try:
                await one(rid, tally)
                done += 1
            finally:
                tokens += tally[0]
                intervals.append((t_sent, time.perf_counter()))
                firsts.append((rid, t_sent, tally[1]))

    cpu0 = time.process_time()
    tasks = [asyncio.create_task(worker(w)) for w in range(concurrency)]
    await asyncio.sleep(duration)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    cpu = time.process_time() - cpu0
    return _summary(tokens, done, cpu, time.perf_counter() - t0, intervals, t0, firsts)


async def raw_client(url: str, concurrency: int, duration: float, out_tokens: int) -> dict:
    import aiohttp

    body = _chat_body(out_tokens)
    conn = aiohttp.TCPConnector(limit=concurrency)
    session = aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None))

    async def one(rid: str, tally: list) -> None:
        headers = {"Content-Type": "application/json", "X-Harness-Request-ID": rid}
        async with session.post(url + "/v1/chat/completions", data=body, headers=headers) as resp:
            async for data in resp.content.iter_any():
                k = data.count(TOKEN_EVENT)
                if k:
                    if tally[1] is None:
                        tally[1] = time.perf_counter()
                    tally[0] += k

    try:
        return await _raw_loop(concurrency, duration, one)
    finally:
        await session.close()


async def wire_client(url: str, concurrency: int, duration: float, out_tokens: int) -> dict:
    from harness.driver.http.network import Network, NetworkSettings
    from harness.driver.http.pool import Pool
    from harness.driver.http.wire import Endpoint

    body = _chat_body(out_tokens)
    network = Network(NetworkSettings(proxy="none"))
    ep = Endpoint(url + "/v1/chat/completions", {"Content-Type": "application/json"}, network)
    pool = Pool(concurrency, 30.0, network)

    async def one(rid: str, tally: list) -> None:
        head = f"X-Harness-Request-ID: {rid}\r\nContent-Length: {len(body)}\r\n\r\n"

        def take(data: bytes, t: float) -> bool:  # where the bytes arrive, stamped there
            k = data.count(TOKEN_EVENT)
            if k:
                if tally[1] is None:
                    tally[1] = t
                tally[0] += k
            return False

        conn = await pool.acquire(ep)
        try:
            await conn.send(ep.head + head.encode(), (body,), take).ended
        finally:
            pool.release(conn)

    try:
        return await _raw_loop(concurrency, duration, one)
    finally:
        pool.close()


async def driver_client(
    url: str, concurrency: int, duration: float, out_tokens: int, metrics_port: int | None = None
) -> dict:
    from harness.driver.config import ReplayConfig
    from harness.driver.http import HTTPTarget, HTTPTargetConfig
    from harness.driver.replay_into import run_replay
    from harness.trace.model import Session, Trace, TraceHeader, Turn

    n = concurrency + int(duration * 3000)  # more sessions than the run can use (< 3000 req/s)
    turn = (Turn(PROMPT_WORDS - 16, out_tokens, 0.0),)
    trace = Trace(
        TraceHeader(seed=1), tuple(Session(f"s{i}", 0.0, 16, "sys", turn) for i in range(n))
    )
    config = ReplayConfig(
        load="closed",
        concurrency=concurrency,
        max_duration=duration,
        drain_s=0,
        api="chat",
        run_id="bench",
    )
    cpu_at_start: list[float] = []

    class Target(HTTPTarget):
        async def start(self, check: bool = True) -> None:
            await super().start(check)
            # like the raw reader, count CPU from an open session (the one-off set-up of a run,
            # manifest, gc.freeze, TLS context, is not a per-token cost)
            cpu_at_start.append(time.process_time())

    target = Target(
        HTTPTargetConfig(endpoints=(url,), model="m", api="chat", max_connections=concurrency)
    )
    server, stats = _live_metrics(metrics_port, concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        await run_replay(trace, target, config, tmp, stats=stats)
        cpu = time.process_time() - cpu_at_start[0]
        if server is not None:
            server.close(0)
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


def _live_metrics(port: int | None, concurrency: int):
    """The metrics endpoint on `port` watching the run's counters (None, None: off)."""
    if port is None:
        return None, None
    from harness.driver.live.stats import ReplayStats
    from harness.export.metrics_server import MetricsServer
    from harness.export.run_metrics import RunLabels

    server, stats = MetricsServer("127.0.0.1", port), ReplayStats()
    server.run(RunLabels("bench", "chat", concurrency=concurrency)).attach(stats)
    return server, stats


class Scraper(threading.Thread):
    """Reads a metrics endpoint once a second (a Prometheus at a 1-s interval) until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.scrapes = url, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            try:
                urllib.request.urlopen(self.url, timeout=5).read()
                self.scrapes += 1
            except OSError:  # not listening yet, or closed already
                pass


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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_entries(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/log?clear=1", timeout=60) as resp:
        return orjson.loads(resp.read())


def _by_id(entries: list[dict]) -> dict[str, dict]:
    return {e["request_id"]: e for e in entries if e["request_id"]}


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class CPUSampler(threading.Thread):
    """Samples a process's CPU seconds (user + system, all threads) against perf_counter."""

    def __init__(self, pid: int, every: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.pid, self.every, self.samples = pid, every, []
        self.stopped = threading.Event()

    def run(self) -> None:
        path = f"/proc/{self.pid}/stat"
        while not self.stopped.is_set():
            try:
                with open(path, "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                return
            # after the name: state is field 3, utime 14 and stime 15 (1-based, proc(5))
            self.samples.append((time.perf_counter(), (int(fields[11]) + int(fields[12])) / TICK))
            time.sleep(self.every)

    def cpu_at(self, t: float) -> float:
        ts = [x[0] for x in self.samples]
        return float(np.interp(t, ts, [x[1] for x in self.samples]))


def _window_cost(sampler: CPUSampler, entries: list[dict]) -> dict:
    """Client CPU and streamed tokens over the window the server saw the load in."""
    done = [e for e in entries if e.get("t_end") is not None and e.get("t_first_token")]
    if len(done) < 10 or len(sampler.samples) < 2:
        return {"window_s": float("nan"), "window_cpu_us_per_token": float("nan")}
    a = float(np.percentile([e["t_recv"] for e in done], 2))
    b = float(np.percentile([e["t_end"] for e in done], 98))
    tokens = 0.0
    for e in done:
        lo, hi = e["t_first_token"], e["t_end"]
        n = e.get("output_tokens", 0)
        if hi <= lo:
            tokens += n if a <= lo <= b else 0
        else:
            tokens += n * max(0.0, min(hi, b) - max(lo, a)) / (hi - lo)
    cpu = sampler.cpu_at(b) - sampler.cpu_at(a)
    return {
        "window_s": b - a,
        "window_tokens": tokens,
        "window_cpu_s": cpu,
        "window_cpu_us_per_token": cpu / max(tokens, 1.0) * 1e6,
    }


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
    port = _free_port() if role == "metrics" else None
    cmd = [
        sys.executable,
        __file__,
        "--client",
        "driver" if role == "metrics" else role,
        "--url",
        url,
        "--concurrency",
        str(c),
        "--duration",
        str(args.duration),
        "--output-tokens",
        str(args.output_tokens),
        *(["--metrics-port", str(port)] if port is not None else []),
    ]
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics") if port is not None else None
    if scraper is not None:
        scraper.start()
    try:
        out, sampler = _sampled(cmd, args.duration * 10 + 120, args.pin)
    finally:
        if scraper is not None:
            scraper.stopped.set()
    res = json.loads(out)
    res["scrapes"] = scraper.scrapes if scraper is not None else 0
    entries = _get_entries(url)
    res.update(_accuracy(res.pop("firsts"), _by_id(entries)))
    res.update(_window_cost(sampler, entries))
    res.update(
        role=role,
        concurrency=c,
        tok_s=res["tokens"] / res["wall_s"],
        req_s=res["requests"] / res["wall_s"],
        cpu_us_per_token=res["cpu_s"] / max(res["tokens"], 1) * 1e6,
    )
    return res


def _sampled(cmd: list[str], timeout: float, pin: bool) -> tuple[bytes, CPUSampler]:
    """Run a client to its end, its CPU sampled from outside; its stdout."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_pin(pin, 1)
    )
    sampler = CPUSampler(proc.pid)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        sampler.stopped.set()
        if proc.poll() is None:
            proc.kill()
    if proc.returncode:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return out, sampler


def vllm_bench_skip_reason(command: str) -> str | None:
    """Why `vllm bench serve` cannot run here (None: it can)."""
    argv = shlex.split(command)
    if not argv or shutil.which(argv[0]) is None:
        return f"{argv[0] if argv else command!r} is not installed"
    try:
        probe = subprocess.run([*argv, "--help"], capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{command} --help` did not run: {exc}"
    if probe.returncode != 0 or b"--max-concurrency" not in probe.stdout:
        return f"`{command} --help` failed: {probe.stderr.decode()[-300:].strip()}"
    return None


def _run_vllm(command: str, url: str, c: int, prompts: int, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            *shlex.split(command),
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
            "--base-url",
            url,
            "--model",
            "m",
            "--tokenizer",
            args.vllm_tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            str(PROMPT_WORDS),
            "--random-output-len",
            str(args.output_tokens),
            "--ignore-eos",
            "--num-prompts",
            str(prompts),
            "--max-concurrency",
            str(c),
            "--request-rate",
            "inf",
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            tmp,
            "--result-filename",
            "r.json",
            "--seed",
            "1",
        ]
        t = time.perf_counter()
        _, sampler = _sampled(cmd, 1800, args.pin)
        wall = time.perf_counter() - t
        result = orjson.loads((Path(tmp) / "r.json").read_bytes())
    entries = _get_entries(url)
    res = {
        "role": "vllm",
        "concurrency": c,
        "requests": result.get("completed", 0),
        "failed": result.get("failed", 0),
        "wall_s": wall,
        "cpu_s": sampler.samples[-1][1] if sampler.samples else float("nan"),
    }
    res.update(_window_cost(sampler, entries))
    w = res["window_s"]
    res.update(
        tok_s=res.get("window_tokens", 0) / w if w == w and w > 0 else float("nan"),
        req_s=result.get("request_throughput", float("nan")),
        cpu_us_per_token=float("nan"),
        held=float("nan"),
        n=len(entries),
        ttft_err_p50_us=float("nan"),
        ttft_err_p99_us=float("nan"),
        lag_p50_us=float("nan"),
        lag_p99_us=float("nan"),
    )
    return res


def _pin(enabled: bool, cpu: int):
    """With --pin, the server runs on CPU 0 and each client on CPU 1 (Linux)."""
    if not enabled or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, {cpu % (os.cpu_count() or 1)})


def _start_server(pin: bool, token_delay: float) -> tuple[subprocess.Popen, str]:
    return local_server.start_server(
        SERVER,
        "--no-body",
        "--no-prefix-cache",
        "--token-delay",
        str(token_delay),
        preexec_fn=_pin(pin, 0),
    )


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
    ap.add_argument(
        "--vllm-bench",
        metavar="CMD",
        help='also run `vllm bench serve` side by side (e.g. "vllm bench serve"); skipped with the '
        "reason when CMD is not installed",
    )
    ap.add_argument(
        "--vllm-tokenizer",
        default="google/gemma-3-270m",
        help="tokenizer folder or name for vllm bench serve's random prompts (no network here)",
    )
    ap.add_argument(
        "--no-wire", action="store_true", help="skip the raw reader on the driver's own wire"
    )
    ap.add_argument(
        "--metrics",
        action="store_true",
        help="also run the driver with its live metrics endpoint on, scraped once a second",
    )
    ap.add_argument("--client", choices=("raw", "wire", "driver"), help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--metrics-port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    if args.client:
        fn = {"raw": raw_client, "wire": wire_client, "driver": driver_client}[args.client]
        coro = fn(args.url, args.concurrency[0], args.duration, args.output_tokens)
        if args.metrics_port is not None:
            coro.close()
            coro = driver_client(
                args.url, args.concurrency[0], args.duration, args.output_tokens, args.metrics_port
            )
        with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None) as runner:
            print(json.dumps(runner.run(coro)))
        return
    vllm = args.vllm_bench
    if vllm and (why := vllm_bench_skip_reason(vllm)) is not None:
        print(f"vllm bench serve: skipped ({why})", flush=True)
        vllm = None
    server, url = _start_server(args.pin, args.token_delay)
    rows = []
    roles = ("raw", "driver") if args.no_wire else ("raw", "wire", "driver")
    try:
        for c in args.concurrency:
            for repeat in range(args.repeats):
                order = roles
                if args.metrics:  # driver and metrics back to back, in alternating order
                    order = (
                        (*roles, "metrics")
                        if repeat % 2 == 0
                        else (*roles[:-1], "metrics", "driver")
                    )
                for role in order:
                    rows.append(_run_client(role, url, c, args))
                    _print_row(rows[-1])
                if vllm:
                    prompts = max(100, round(rows[-len(roles)]["req_s"] * args.duration))
                    try:
                        rows.append(_run_vllm(vllm, url, c, prompts, args))
                    except SystemExit as exc:  # e.g. its tokenizer cannot be fetched offline
                        last = (str(exc).strip().splitlines() or ["?"])[-1]
                        print(
                            f"vllm bench serve: skipped from here on (it failed: {last})",
                            flush=True,
                        )
                        vllm = None
                        continue
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
        f"cpu/token {r['cpu_us_per_token']:6.1f} us (window {r['window_cpu_us_per_token']:6.1f})  held {r['held']:7.1f} ({r['held'] / r['concurrency']:.0%})  "
        f"ttft err p50/p99 {r['ttft_err_p50_us']:7.0f}/{r['ttft_err_p99_us']:7.0f} us  "
        f"lag p50/p99 {r['lag_p50_us']:7.0f}/{r['lag_p99_us']:7.0f} us  (n={r['n']}, failed={r['failed']})",
        flush=True,
    )


def _paired(
    rows: list[dict], c: int, key: str, base: str = "raw", role: str = "driver"
) -> list[float]:
    """`role` / `base` for each repeat at concurrency `c`: each `role` run over the `base` run
    of the same repeat (the machine's load moves both, so pairs say more than medians of each)."""
    raw = [r[key] for r in rows if r["concurrency"] == c and r["role"] == base]
    drv = [r[key] for r in rows if r["concurrency"] == c and r["role"] == role]
    return [d / r for r, d in zip(raw, drv, strict=False) if r > 0]


def _print_ratios(rows: list[dict]) -> None:
    print(
        "\ndriver / raw (medians over repeats; paired: each driver run over the raw run before it):"
    )

    def get(c: int, role: str, key: str) -> float:
        return float(
            np.median([r[key] for r in rows if r["concurrency"] == c and r["role"] == role])
        )

    roles = {r["role"] for r in rows}
    have_vllm = {r["concurrency"] for r in rows if r["role"] == "vllm"}
    for c in sorted({r["concurrency"] for r in rows}):
        window = "window_cpu_us_per_token"
        vs_vllm = (
            f"  window cpu/token vs vllm bench serve x{get(c, 'driver', window) / get(c, 'vllm', window):.2f}"
            if "vllm" in roles and c in have_vllm
            else ""
        )
        pairs = _paired(rows, c, "cpu_us_per_token")
        spread = (
            f"  paired x{np.median(pairs):.2f} (x{min(pairs):.2f}-x{max(pairs):.2f}, {len(pairs)} pairs)"
            if len(pairs) > 1
            else ""
        )
        print(
            f"c={c:5d} cpu/token x{get(c, 'driver', 'cpu_us_per_token') / get(c, 'raw', 'cpu_us_per_token'):.2f}{spread}  "
            f"(window x{get(c, 'driver', window) / get(c, 'raw', window):.2f}){vs_vllm}  "
            f"tok/s x{get(c, 'driver', 'tok_s') / get(c, 'raw', 'tok_s'):.2f}  "
            f"held {get(c, 'driver', 'held') / c:.0%} (raw {get(c, 'raw', 'held') / c:.0%})"
        )
        if "metrics" in roles:
            pairs = _paired(rows, c, "cpu_us_per_token", "driver", "metrics")
            spread = f" (x{min(pairs):.3f}-x{max(pairs):.3f}, {len(pairs)} pairs)" if pairs else ""
            print(
                f"        live metrics: metrics / driver cpu/token paired x{np.median(pairs):.3f}"
                f"{spread}, scrapes a run {np.median([r['scrapes'] for r in rows if r['role'] == 'metrics' and r['concurrency'] == c]):.0f}"
            )
        if "wire" in roles:
            pairs = _paired(rows, c, "cpu_us_per_token", "wire")
            spread = f" (x{min(pairs):.2f}-x{max(pairs):.2f})" if len(pairs) > 1 else ""
            print(
                f"        over its own wire: driver / wire cpu/token paired x{np.median(pairs):.2f}"
                f"{spread}, wire / raw x{get(c, 'wire', 'cpu_us_per_token') / get(c, 'raw', 'cpu_us_per_token'):.2f}"
            )


if __name__ == "__main__":
    main()
