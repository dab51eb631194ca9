"""A Weka corpus's joins replayed: each join's gap after its spawning turn, replayed vs recorded.

    PYTHONPATH=. .venv/bin/python benchmarks/corpus_join_gaps.py CORPUS_DIR [--scale 0.01] [--json F]

In the corpus a join request's `think_time` runs from the end of the parent's spawning call and
already holds its subagents' run time. For every join this builds a small family: the spawning
turn (no pause), the subagents as recorded (their own pauses) and the join turn with its
recorded pause, every pause multiplied by `--scale` so that hours of corpus time replay in
seconds, with 8-token prompts and 1-token replies (the timing is what is measured, not the
server). All families run at once against a loopback SSE server (tests/driver/sse_server.py).
The replayed gap is the join's `t_sent` minus the spawning turn's `t_done`, divided by `--scale`;
the corpus gap is the join turn's `think_s` as imported. Prints the median and p90 of
|replayed - corpus| in corpus seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.trace.formats import load_trace  # noqa: E402
from harness.trace.model import Session, Trace, TraceHeader, Turn  # noqa: E402
from tests.driver.helpers import replay  # noqa: E402
from tests.driver.sse_server import ServerConfig, SSETestServer  # noqa: E402


def _small(think: float, spawns: tuple[str, ...] = ()) -> Turn:
    return Turn(8, 1, think, spawns)


def _copy(trace: Trace, sid: str, new_id: str, parent: str, scale: float) -> list[Session]:
    """Session `sid` and its descendants under new ids, pauses scaled, prompts tiny."""
    s = trace.session(sid)
    out: list[Session] = []
    turns = []
    for t in s.turns:
        kids = tuple(f"{new_id}.{i}" for i, _ in enumerate(t.spawns))
        for kid, orig in zip(kids, t.spawns, strict=True):
            out += _copy(trace, orig, kid, new_id, scale)
        turns.append(_small(t.think_s * scale, kids))
    head = replace(s, id=new_id, parent=parent, system_tokens=8, turns=tuple(turns))
    return [head, *out]


def join_families(trace: Trace, scale: float) -> tuple[Trace, dict[str, float]]:
    """One family per join, and each join's corpus gap (s) by its family id."""
    sessions: list[Session] = []
    corpus: dict[str, float] = {}
    for s in trace.sessions:
        for k, turn in enumerate(s.turns[:-1]):
            if not turn.spawns:
                continue
            fid = f"{s.id}@{k}"
            kids = tuple(f"{fid}.{i}" for i, _ in enumerate(turn.spawns))
            join = s.turns[k + 1]
            corpus[fid] = join.think_s
            turns = (_small(0.0, kids), _small(join.think_s * scale))
            main = Session(fid, 0.0, 8, "sys", turns)
            sessions.append(main)
            for kid, orig in zip(kids, turn.spawns, strict=True):
                sessions += _copy(trace, orig, kid, fid, scale)
    return Trace(TraceHeader(seed=1), tuple(sessions)), corpus


async def measure(trace: Trace, scale: float) -> dict[str, float]:
    server = SSETestServer(ServerConfig(token_delay=0.0))
    await server.start()
    try:
        families = len(trace.main_sessions)
        with tempfile.TemporaryDirectory() as tmp:
            _, records, _ = await replay(
                trace, server.url, Path(tmp), load="closed", concurrency=families
            )
    finally:
        await server.stop()
    by = {r["request_id"]: r for r in records}
    return {
        s.id: (by[f"{s.id}:1"]["t_sent"] - by[f"{s.id}:0"]["t_done"]) / scale
        for s in trace.main_sessions
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--json")
    args = ap.parse_args()
    families, corpus = join_families(load_trace(args.corpus), args.scale)
    replayed = asyncio.run(measure(families, args.scale))
    err = np.array([abs(replayed[f] - corpus[f]) for f in corpus])
    out = {
        "joins": len(err),
        "abs_error_s": {"median": float(np.median(err)), "p90": float(np.quantile(err, 0.9)),
                        "sum": float(err.sum()), "max": float(err.max())},
        "per_join": {f: {"corpus_s": corpus[f], "replayed_s": round(replayed[f], 2)} for f in corpus},
    }  # fmt: skip
    print(json.dumps({k: v for k, v in out.items() if k != "per_join"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
