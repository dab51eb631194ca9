"""Client timing at full-size prompts: client TTFT against the server's own, and the body's cost.

    .venv/bin/python benchmarks/bench_fullsize.py [--sessions 80] [--concurrency 64]
                                                   [--requests 1200] [--think-cap 2] [--pin]
                                                   [--json FILE]

A full-scale AgentX trace (`harness trace generate --profile workloads/agentx.yaml`, 142k-token
median prompts) is replayed by `harness.driver.run_replay` as token-id prompts
(`api: completions`, `prompt_format: tokens`, ~1 MB of JSON per body) in closed loop at
`--concurrency`, each slot starting mid-trajectory (so prompts are full-size from the start) and
every think time capped to `--think-cap` seconds, against the zero-delay server of
benchmarks/stamp_server.py in its own process. It stamps, on the client's CLOCK_MONOTONIC
(`time.perf_counter()` in both processes on Linux), where the bytes move: when a request's first
bytes reached it, when its last body byte did, and when its first token went to the socket.

Reported, p50 / p90 / p95 / p99 / max over the requests, overall and by prompt size:

- client TTFT − server TTFT from the request's first bytes in (the headline: the upload is on
  both sides, so this is the client's timing error: its send stamp's and its first-token stamp's);
- the same with the server's TTFT counted from the whole body in (what a server's own TTFT
  metric starts from): the client's share of the TTFT, upload included;
- the upload: server body-in − client `t_sent`;
- the first-token lag: client first-token stamp − server first-token write.

Beside it, two baselines measured in the same run on the same 40 bodies (100k-200k tokens), one
at a time: a minimal aiohttp client (stamped before `post`, as most tools do; 20 ms apart), and
a blocking socket with no event loop, back to back: the machine's own floor. Before the replay,
the client CPU per request to build the prompt (`RequestSource.prompt`) and to encode the body
(`HTTPTarget.encode`), timed alone (`time.thread_time`) over the same requests. The load
average is printed beside the figures.

`--think-cap 0.001` sends back to back: client and server then both saturate one core each and
the figures measure queueing on both sides (seconds), not timing error; the default, 2 s,
keeps 64 sessions in flight at ~30 requests/s (~30 MB/s of bodies). The server streams at most
`--max-output` tokens per request (default 32; the trace asks for 815 on average): a zero-delay
server writes a whole reply at once, and long replies only add bytes for the client to read.
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

import local_server
import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SERVER = ROOT / "benchmarks" / "stamp_server.py"
SIZE_BINS = ((0, 50_000), (50_000, 100_000), (100_000, 200_000), (200_000, 10**9))


def start_server(pin: bool, max_output: int | None) -> tuple[subprocess.Popen, str]:
    cpu = ["--cpu", "0"] if pin else []
    return local_server.start_server(SERVER, "--max-output", str(max_output or 10**9), *cpu)


def server_log(url: str) -> dict[str, dict]:
    with urllib.request.urlopen(url + "/log?clear=1", timeout=120) as resp:
        return {e["request_id"]: e for e in orjson.loads(resp.read()) if e["request_id"]}


def make_trace(sessions: int, seed: int):
    from harness.trace.generate import generate
    from harness.trace.profile import load_profile

    profile = load_profile(ROOT / "workloads" / "agentx.yaml")
    return generate(profile, sessions=sessions, seed=seed)


def replay(
    trace, url: str, concurrency: int, requests: int, think_cap: float, run_dir: Path
) -> list[dict]:
    from harness.driver.config import ReplayConfig
    from harness.driver.http import HTTPTarget, HTTPTargetConfig
    from harness.driver.replay_into import connection_limit, run_blocking, run_replay

    config = ReplayConfig(
        load="closed",
        concurrency=concurrency,
        max_requests=requests,
        mid_trajectory=True,
        think_cap_s=think_cap,
        api="completions",
        prompt_format="tokens",
        cycle_trace=False,
        run_id="fullsize",
    )
    # subagents run beside their parent: as `harness replay` does, size the pool to the family
    limit = connection_limit(trace, config)
    target = HTTPTarget(
        HTTPTargetConfig(endpoints=(url,), model="m", api="completions", max_connections=limit)
    )
    run_blocking(run_replay(trace, target, config, run_dir))
    t0 = orjson.loads((run_dir / "manifest.json").read_bytes())["t0_perf_counter"]
    recs = [orjson.loads(x) for x in (run_dir / "records.jsonl").read_bytes().splitlines()]
    for r in recs:
        r["t0"] = t0
    return recs


def raw_floor(url: str, bodies: list[tuple[int, bytes]]) -> list[dict]:
    """The baseline: a minimal aiohttp client posting the same bodies one at a time (no
    concurrency), stamping its send and first read. What any aiohttp client sees here."""
    import aiohttp

    async def run() -> list[dict]:
        recs = []
        async with aiohttp.ClientSession() as session:
            for i, (tokens, body) in enumerate(bodies):
                rid = f"raw-{i}"
                headers = {"Content-Type": "application/json", "X-Harness-Request-ID": rid}
                t_sent, first = time.perf_counter(), None
                async with session.post(url + "/v1/completions", data=body, headers=headers) as r:
                    async for _ in r.content.iter_any():
                        first = first or time.perf_counter()
                recs.append(
                    {
                        "request_id": rid,
                        "status": "ok",
                        "t0": 0.0,
                        "t_sent": t_sent,
                        "t_first_token": first,
                        "prompt_tokens_expected": tokens,
                    }
                )
                await asyncio.sleep(0.02)
        return recs

    from harness.driver.replay_into import run_blocking

    return run_blocking(run())


def socket_floor(url: str, bodies: list[tuple[int, bytes]]) -> list[dict]:
    """The machine's floor: a blocking socket, no event loop, the same bodies one at a time,
    back to back, stamped just before `sendall` and just after the first `recv`."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    recs = []
    with socket.create_connection((where.hostname, where.port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i, (tokens, body) in enumerate(bodies):
            rid = f"sock-{i}"
            head = (
                f"POST /v1/completions HTTP/1.1\r\nHost: {where.netloc}\r\n"
                f"Content-Type: application/json\r\nX-Harness-Request-ID: {rid}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            t_sent = time.perf_counter()
            s.sendall(head + body)
            data = s.recv(1 << 16)
            first = time.perf_counter()
            while not data.endswith(b"0\r\n\r\n"):
                data += s.recv(1 << 16)
            recs.append(
                {
                    "request_id": rid,
                    "status": "ok",
                    "t0": 0.0,
                    "t_sent": t_sent,
                    "t_first_token": first,
                    "prompt_tokens_expected": tokens,
                }
            )
    return recs


def timing_rows(recs: list[dict], log: dict[str, dict], skip_s: float) -> list[dict]:
    rows = []
    for r in recs:
        e = log.get(r["request_id"])
        if r["status"] != "ok" or e is None or r["t_first_token"] is None or r["t_sent"] < skip_s:
            continue
        sent, first = r["t0"] + r["t_sent"], r["t0"] + r["t_first_token"]
        client_ttft = first - sent
        rows.append(
            {
                "prompt_tokens": r["prompt_tokens_expected"],
                "err_body": client_ttft - (e["t_first_token"] - e["t_body"]),
                "err_headers": client_ttft - (e["t_first_token"] - e["t_recv"]),
                "upload": e["t_body"] - sent,
                "lag": first - e["t_first_token"],
            }
        )
    return rows


def _stats(xs: list[float]) -> str:
    if not xs:
        return "n=0"
    a = np.asarray(xs) * 1e3
    return (
        f"p50 {np.percentile(a, 50):7.3f}  p90 {np.percentile(a, 90):7.3f}  "
        f"p95 {np.percentile(a, 95):7.3f}  p99 {np.percentile(a, 99):7.3f}  "
        f"max {a.max():7.3f} ms  (|p99| {np.percentile(np.abs(a), 99):.3f})"
    )


def report_timing(rows: list[dict]) -> dict:
    out = {}
    for lo, hi in ((0, 10**9), *SIZE_BINS):
        part = [x for x in rows if lo <= x["prompt_tokens"] < hi]
        if not part:
            continue
        label = "all" if hi == 10**9 and lo == 0 else f"{lo // 1000}k-{hi // 1000}k"
        med = np.median([x["prompt_tokens"] for x in part])
        print(f"\nprompts {label}: n={len(part)}, median {med:,.0f} tokens")
        for key, name in (
            ("err_body", "client-server TTFT (from body in)"),
            ("err_headers", "client-server TTFT (from first bytes in)"),
            ("upload", "upload: body in - t_sent"),
            ("lag", "first-token lag"),
        ):
            print(f"  {name:38s} {_stats([x[key] for x in part])}")
        out[label] = {
            key: {q: float(np.percentile([x[key] for x in part], q)) for q in (50, 90, 95, 99)}
            for key in ("err_body", "err_headers", "upload", "lag")
        } | {"n": len(part), "median_prompt_tokens": float(med)}
    return out


def body_cost(trace, n: int) -> dict:
    """CPU per request to build each prompt and to encode its body, turns in session order."""
    from harness.driver.http import HTTPTarget, HTTPTargetConfig
    from harness.driver.target import RequestSpec
    from harness.trace.requests import RequestSource

    source = RequestSource(trace, api="completions", prompt_format="tokens")
    target = HTTPTarget(HTTPTargetConfig(endpoints=("http://x",), model="m"))
    encode_body = getattr(target, "encode", None) or (lambda spec: orjson.dumps(target.body(spec)))

    build, encode, sizes, tokens, done, bodies = [], [], [], [], 0, []
    for s in trace.main_sessions:
        for k, turn in enumerate(s.turns):
            c0 = time.thread_time()
            p = source.prompt(s.id, k)
            c1 = time.thread_time()
            spec = RequestSpec(
                request_id=f"{s.id}:{k}",
                session_id=s.id,
                sticky_key=s.id,
                endpoint=0,
                max_tokens=turn.output_tokens,
                prompt_tokens=p.n_tokens,
                messages=p.messages,
                prompt=p.body,
                prompt_json=getattr(p, "ids_json", None),  # (older code: no JSON kept)
            )
            data = encode_body(spec)  # what the driver sends (older code: one bytes object)
            c2 = time.thread_time()
            if not isinstance(data, bytes):  # pieces sent in order, not joined by the driver
                data = b"".join(data)
            build.append(c1 - c0)
            encode.append(c2 - c1)
            sizes.append(len(data))
            if 100_000 <= p.n_tokens < 200_000 and len(bodies) < 40:
                bodies.append((p.n_tokens, data))
            tokens.append(p.n_tokens)
            done += 1
            if done >= n:
                break
        source.forget([s.id])
        if done >= n:
            break
    big = [i for i, t in enumerate(tokens) if t >= 100_000]
    res = {
        "requests": done,
        "median_prompt_tokens": float(np.median(tokens)),
        "median_body_bytes": float(np.median(sizes)),
        "build_us_median": float(np.median(build)) * 1e6,
        "encode_us_median": float(np.median(encode)) * 1e6,
        "build_us_per_1k_tokens": sum(build) / sum(tokens) * 1e9,
        "encode_us_per_1k_tokens": sum(encode) / sum(tokens) * 1e9,
        "encode_us_median_100k_plus": float(np.median([encode[i] for i in big])) * 1e6
        if big
        else float("nan"),
    }
    print(
        f"\nbody cost over {done} requests (median prompt {res['median_prompt_tokens']:,.0f} "
        f"tokens, body {res['median_body_bytes'] / 1e6:.2f} MB): build prompt median "
        f"{res['build_us_median']:.0f} us ({res['build_us_per_1k_tokens']:.2f} us/1k tokens), "
        f"encode body median {res['encode_us_median']:.0f} us "
        f"({res['encode_us_per_1k_tokens']:.2f} us/1k tokens; "
        f"{res['encode_us_median_100k_plus']:.0f} us at >= 100k tokens)"
    )
    return res, bodies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=80, help="main sessions to generate")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=1200, help="requests to send (cap)")
    ap.add_argument("--think-cap", type=float, default=2.0, help="longest think time, seconds")
    ap.add_argument(
        "--skip-s",
        type=float,
        default=3.0,
        help="leave out requests sent before this (the start's burst of 64 prompts "
        "built from scratch, mid-trajectory)",
    )
    ap.add_argument("--cost-requests", type=int, default=300, help="requests timed for body cost")
    ap.add_argument(
        "--max-output",
        type=int,
        default=32,
        help="the server streams at most this many tokens per request (0: all asked)",
    )
    ap.add_argument("--pin", action="store_true", help="server on CPU 0, client on CPU 1")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {1 % (os.cpu_count() or 1)})
    trace = make_trace(args.sessions, args.seed)
    cost, bodies = body_cost(trace, args.cost_requests)
    server, url = start_server(args.pin, args.max_output or None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            load0 = os.getloadavg()
            t, cpu = time.perf_counter(), time.process_time()
            recs = replay(trace, url, args.concurrency, args.requests, args.think_cap, Path(tmp))
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
            log = server_log(url)
            raw = raw_floor(url, bodies)
            raw_log = server_log(url)
            sock = socket_floor(url, bodies)
            sock_log = server_log(url)
    finally:
        server.terminate()
        server.wait(10)
    rows = timing_rows(recs, log, args.skip_s)
    ok = sum(r["status"] == "ok" for r in recs)
    print(
        f"{len(recs)} requests ({ok} ok) at concurrency {args.concurrency}, think time capped "
        f"at {args.think_cap} s, in {wall:.1f} s, client CPU {cpu:.1f} s "
        f"({cpu / len(recs) * 1e3:.1f} ms per request); timing over the {len(rows)} sent after "
        f"{args.skip_s} s; "
        f"load average before {load0[0]:.2f}, after {os.getloadavg()[0]:.2f}"
    )
    result = {
        "timing": report_timing(rows),
        "cost": cost,
        "load_avg": [load0[0], os.getloadavg()[0]],
        "requests": len(recs),
        "ok": ok,
        "client_cpu_s": cpu,
        "wall_s": wall,
    }
    print(
        f"\nbaseline: a minimal aiohttp client, the same server, {len(raw)} bodies of 100k-200k "
        "tokens sent one at a time"
    )
    result["raw_floor"] = report_timing(timing_rows(raw, raw_log, 0.0))
    print(
        f"\nthe machine's floor: a blocking socket (no event loop), the same {len(sock)} bodies "
        "back to back"
    )
    result["socket_floor"] = report_timing(timing_rows(sock, sock_log, 0.0))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
