"""What `harness record` costs an agent: added time to first token and per-chunk delay, against a
direct connection to the same upstream, in the same run.

    .venv/bin/python benchmarks/bench_record.py [--runs 3] [--sessions 12] [--turns 8]
                                                [--concurrency 4] [--chunks 40] [--gap-ms 5]
                                                [--json FILE]

Three processes: a paced streaming upstream (this file with `--serve`: aiohttp, each chat
request answered with `--chunks` SSE events `--gap-ms` apart, each event stamped with the
upstream's `time.perf_counter()` just before its write), `harness record` in front of it as a
user runs it (recording on: stand-ins, requests.jsonl, the trace rewritten every 30 s), and
this client. Each run sends the same agent-shaped load twice, once straight to the upstream and
once through the proxy, in alternating order: `--concurrency` sessions in flight, each
`--turns` requests whose prompt is the previous one plus a reply and a ~2 KB tool result (so
the recorder's stand-ins see an agent's growing context). Per request: TTFT (send to the first
event's arrival); per event: delay (its arrival minus the upstream's stamp; one clock,
CLOCK_MONOTONIC). A warm-up (two short sessions each way) goes first, unmeasured. Reported per
run: p50 and p99 of each, direct and proxied, and what the proxy
added (proxied minus direct, percentile by percentile); then each figure's range over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]


# ---- the upstream -----------------------------------------------------------------------------


def serve(chunks: int, gap_s: float) -> None:
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(chunks):
            event = {
                "choices": [{"index": 0, "delta": {"content": f" w{i}"}}],
                "t": time.perf_counter(),
            }
            await resp.write(b"data: " + orjson.dumps(event) + b"\n\n")
            await asyncio.sleep(gap_s)
        usage = {"prompt_tokens": 1, "completion_tokens": chunks, "total_tokens": chunks + 1}
        await resp.write(b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_post("/v1/chat/completions", chat)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        print(f"PORT {runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# ---- the client -------------------------------------------------------------------------------


def _tool_result(session: int, turn: int) -> str:
    return "\n".join(f"{n:4d}\tdef f_{session}_{turn}_{n}(x): return x * {n}" for n in range(60))


async def _request(http, url: str, messages: list[dict], out: dict) -> None:
    body = orjson.dumps({"model": "m", "messages": messages, "stream": True, "max_tokens": 40})
    t0 = time.perf_counter()
    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        buf = b""
        async for data in resp.content.iter_any():
            now = time.perf_counter()
            buf += data
            *events, buf = buf.split(b"\n\n")
            for event in events:
                if not event.startswith(b'data: {"choices":[{'):
                    continue
                if not out["first"]:
                    out["ttft"].append(now - t0)
                    out["first"] = True
                out["delay"].append(now - orjson.loads(event[6:])["t"])
    out["first"] = False


async def _session(http, url: str, s: int, turns: int, out: dict) -> None:
    messages = [
        {"role": "system", "content": "You are a coding agent. " * 40},
        {"role": "user", "content": f"Task {s}: fix the failing test."},
    ]
    for k in range(turns):
        mine = {"ttft": out["ttft"], "delay": out["delay"], "first": False}
        await _request(http, url, messages, mine)
        messages = messages + [
            {
                "role": "assistant",
                "content": "Reading the file.",
                "tool_calls": [
                    {
                        "id": f"c{s}_{k}",
                        "type": "function",
                        "function": {"name": "Read", "arguments": json.dumps({"path": f"f{k}.py"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{s}_{k}", "content": _tool_result(s, k)},
        ]


async def load(url: str, sessions: int, turns: int, concurrency: int, tag: str) -> dict:
    import aiohttp

    out: dict = {"ttft": [], "delay": []}
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def one(s: int) -> None:
            async with gate:
                await _session(http, url, s, turns, out)

        await asyncio.gather(*(one(f"{tag}{i}".__hash__() % 10**6) for i in range(sessions)))
    return out


# ---- the run ----------------------------------------------------------------------------------


def _start(cmd: list[str], marker: str, env=None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if marker not in line:
        proc.kill()
        raise SystemExit(f"{cmd[:4]} did not start: {line!r}")
    return proc, line


def _percentiles(values: list[float]) -> tuple[float, float]:
    p50, p99 = np.percentile(np.asarray(values) * 1e3, [50, 99])
    return float(p50), float(p99)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=12)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--chunks", type=int, default=40)
    ap.add_argument("--gap-ms", type=float, default=5.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.serve:
        serve(args.chunks, args.gap_ms / 1000)
        return 0
    up, line = _start(
        [
            sys.executable,
            __file__,
            "--serve",
            "--chunks",
            str(args.chunks),
            "--gap-ms",
            str(args.gap_ms),
        ],
        "PORT",
    )
    upstream = f"http://127.0.0.1:{line.split()[1]}"
    folder = Path(tempfile.mkdtemp(prefix="bench-record-"))
    env = {**os.environ, "XDG_CONFIG_HOME": str(folder / "config")}
    rec, line = _start(
        [
            sys.executable,
            "-m",
            "harness",
            "record",
            "--upstream",
            upstream,
            "-o",
            str(folder / "rec"),
        ],
        "listening on",
        env,
    )
    proxy = line.split("listening on ")[1].split(",")[0]
    runs = []
    try:
        for base in (upstream, proxy):  # warm-up, not measured: pools, code paths, caches
            asyncio.run(load(f"{base}/v1/chat/completions", 2, 2, 2, "warm"))
        for r in range(args.runs):
            order = [("direct", upstream), ("proxied", proxy)]
            figures = {}
            for name, base in order if r % 2 == 0 else order[::-1]:
                url = f"{base}/v1/chat/completions"
                got = asyncio.run(
                    load(url, args.sessions, args.turns, args.concurrency, f"{r}{name}")
                )
                figures[name] = {
                    "ttft": _percentiles(got["ttft"]),
                    "delay": _percentiles(got["delay"]),
                    "requests": len(got["ttft"]),
                    "events": len(got["delay"]),
                }
            runs.append(figures)
            _show(r, figures)
    finally:
        rec.send_signal(2)
        rec.wait(60)
        up.kill()
    summary = _summary(runs)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"runs": runs, "summary": summary, "args": vars(args)}, default=str, indent=1
            )
        )
    recording = json.loads((folder / "rec" / "recording.json").read_text())
    print(
        f"recording: {recording['requests']['captured']} requests, "
        f"{recording['sessions']['main']} sessions, in {folder / 'rec'}"
    )
    return 0


def _show(r: int, figures: dict) -> None:
    d, p = figures["direct"], figures["proxied"]
    for what in ("ttft", "delay"):
        added = [p[what][i] - d[what][i] for i in (0, 1)]
        print(
            f"run {r + 1} {what:5s} ms  direct p50 {d[what][0]:.3f} p99 {d[what][1]:.3f}  "
            f"proxied p50 {p[what][0]:.3f} p99 {p[what][1]:.3f}  "
            f"added p50 {added[0]:+.3f} p99 {added[1]:+.3f}  "
            f"({d['requests']} requests, {d['events']} events each)",
            flush=True,
        )


def _summary(runs: list[dict]) -> dict:
    out = {}
    for what in ("ttft", "delay"):
        for i, q in enumerate(("p50", "p99")):
            added = [f["proxied"][what][i] - f["direct"][what][i] for f in runs]
            out[f"added_{what}_{q}_ms"] = {
                "min": min(added),
                "max": max(added),
                "median": statistics.median(added),
            }
    return out


if __name__ == "__main__":
    raise SystemExit(main())
