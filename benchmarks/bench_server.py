"""What the HTTP server costs over the in-process engine, and the tokenizer's speed.

    .venv/bin/python benchmarks/bench_server.py [--requests 256] [--concurrency 16] [--json FILE]

The engine is the simulated runner with `sim_time_scale=0`: the real scheduler and block pool,
no model time, so what remains is bookkeeping plus (over HTTP) aiohttp, JSON and SSE. Baselines
measured in the same run: the same requests through `AsyncEngine.generate` in-process, and the
trace content's own `encode_words` for the tokenizer. CPU time is reported beside wall time
because a shared machine stretches wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import aiohttp

from harness.engine.config import EngineConfig
from harness.serving.async_engine import AsyncEngine, SamplingParams
from harness.serving.server import serve_engine
from harness.serving.tokenizer import Tokenizer
from harness.trace.content import encode_words
from harness.vocab import TOKEN_BASE, WORDS

PROMPT, OUTPUT = 512, 64


def prompt(k: int) -> list[int]:
    return [TOKEN_BASE + (k * 31 + i * 7) % len(WORDS) for i in range(PROMPT)]


async def in_process(engine: AsyncEngine, n: int, conc: int) -> int:
    sem = asyncio.Semaphore(conc)

    async def one(k: int) -> int:
        async with sem:
            tokens = 0
            async for out in engine.generate(
                f"r{k}", prompt(k), SamplingParams(OUTPUT, ignore_eos=True)
            ):
                tokens += len(out.new_token_ids)
            return tokens

    return sum(await asyncio.gather(*(one(k) for k in range(n))))


async def over_http(url: str, n: int, conc: int) -> int:
    sem = asyncio.Semaphore(conc)
    connector = aiohttp.TCPConnector(limit=conc)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=600)
    ) as session:

        async def one(k: int) -> int:
            body = {
                "prompt": prompt(k),
                "max_tokens": OUTPUT,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            async with sem, session.post(f"{url}/v1/completions", json=body) as resp:
                usage = None
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        usage = json.loads(line[6:]).get("usage") or usage
                return usage["completion_tokens"]

        return sum(await asyncio.gather(*(one(k) for k in range(n))))


async def timed(coro) -> dict:
    wall, cpu = time.perf_counter(), time.process_time()
    tokens = await coro
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "tokens": tokens,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "tokens_per_s": round(tokens / wall, 1),
        "cpu_us_per_token": round(1e6 * cpu / tokens, 1),
    }


async def serving(args) -> dict:
    config = EngineConfig(
        runner="simulated",
        sim_time_scale=0.0,
        num_gpu_blocks=8192,
        device="cpu",
        max_num_seqs=args.concurrency,
    )
    engine = AsyncEngine(config)
    await engine.start()
    server = await serve_engine(engine)
    try:
        await in_process(engine, 4, 4)  # warm-up
        base = await timed(in_process(engine, args.requests, args.concurrency))
        http = await timed(over_http(server.url, args.requests, args.concurrency))
    finally:
        await server.close()  # leaves the engine to us
        await engine.stop()
    return {
        "baseline: in-process AsyncEngine": base,
        "HTTP + SSE server": http,
        "http / in-process wall": round(http["wall_s"] / base["wall_s"], 2),
        "http / in-process cpu": round(http["cpu_s"] / base["cpu_s"], 2),
    }


def tokenizer_speed(n_words: int = 142_000) -> dict:
    text = " ".join(WORDS[(i * 7) % len(WORDS)] for i in range(n_words))
    tok = Tokenizer()
    out = {}
    for name, fn in (
        ("baseline: content.encode_words", encode_words),
        ("Tokenizer.encode", tok.encode),
        ("Tokenizer.decode", lambda t: tok.decode(encode_words(t))),
    ):
        t0 = time.perf_counter()
        fn(text)
        out[name] = round(time.perf_counter() - t0, 4)
    out["encode / baseline"] = round(
        out["Tokenizer.encode"] / out["baseline: content.encode_words"], 2
    )
    return {f"{n_words}-token text, seconds": out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "prompt": PROMPT,
        "output": OUTPUT,
        **asyncio.run(serving(args)),
        "tokenizer": tokenizer_speed(),
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
