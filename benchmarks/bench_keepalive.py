"""Stale keep-alive connections, counted: requests that failed, and of those the ones the server
never received, under think times around 1 s against a 1 s server keep-alive (uvicorn's
`--timeout-keep-alive 1`, nginx's `keepalive_timeout 1s` in front of uvicorn), for this wire
and for the wire before it kept idle connections shorter and resent a stale one's request
(15 s, no resend). Rounds interleave the two. Needs uvicorn (the [test] extra) and nginx.

    python benchmarks/bench_keepalive.py --rounds 3 --workers 80 --turns 10
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.driver.real_programs import Nginx, Uvicorn, think_loop  # noqa: E402


async def one(server: str, wire: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if server == "uvicorn":
            front = back = Uvicorn(folder, keepalive_s=1)
            servers = [back]
        else:
            back = Uvicorn(folder, keepalive_s=5)
            front = Nginx(folder, back.url, buffering=False, keepalive_s=1.0)
            servers = [back, front]
        with servers[0].start():
            if len(servers) == 1:
                return await think_loop(
                    front.url, args.workers, args.turns, args.think, wire == "before"
                )
            with servers[1].start():
                return await think_loop(
                    front.url, args.workers, args.turns, args.think, wire == "before"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=80)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--think", type=float, default=1.0)
    args = p.parse_args()
    print("round server  wire    requests failed never_received resent")
    for r in range(args.rounds):
        for server in ("uvicorn", "nginx"):
            for wire in ("this", "before"):
                got = asyncio.run(one(server, wire, args))
                print(
                    f"{r:5d} {server:7s} {wire:7s} {got['requests']:8d} {got['failed']:6d}"
                    f" {got['failed_never_received']:14d} {got['resent']:6d}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
