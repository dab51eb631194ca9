"""Building small traces by hand and running a replay into a temp folder."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson

from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.replay_into import run_replay
from harness.driver.target import Timeouts
from harness.schema import MANIFEST_FILE, RECORDS_FILE
from harness.trace.model import Session, Trace, TraceHeader, Turn


def sess(
    sid: str,
    turns,
    *,
    arrival: float = 0.0,
    system: int = 32,
    parent=None,
    fork_turn=None,
    mode=None,
) -> Session:
    """`turns`: (new_input, output, think_s[, spawns]) tuples."""
    built = tuple(Turn(t[0], t[1], t[2], tuple(t[3]) if len(t) > 3 else ()) for t in turns)
    return Session(
        sid, arrival, system, "sys0", built, parent=parent, fork_turn=fork_turn, mode=mode
    )


def trace(*sessions: Session, seed: int = 7) -> Trace:
    return Trace(TraceHeader(seed=seed), tuple(sessions))


TEST_TIMEOUTS = Timeouts(connect=2, ttft=2, idle=1, total=10)


def target(
    urls, *, api="chat", model="test-model", timeouts=TEST_TIMEOUTS, preflight=False, **kw
) -> HTTPTarget:
    """The target `harness run` builds, but for the preflight's probe request, off unless asked
    for: these tests count the requests a server saw; those of the probe ask for it."""
    urls = (urls,) if isinstance(urls, str) else tuple(urls)
    config = HTTPTargetConfig(
        endpoints=urls, model=model, api=api, timeouts=timeouts, preflight=preflight, **kw
    )
    return HTTPTarget(config)


async def replay(tr: Trace, urls, run_dir: Path, *, target_kw=None, **config):
    config.setdefault("run_id", "t")
    cfg = ReplayConfig(**config)
    tgt = target(urls, api=cfg.api, **(target_kw or {}))
    result = await run_replay(tr, tgt, cfg, run_dir)
    return result, load_records(run_dir), load_manifest(run_dir)


def load_records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (Path(run_dir) / RECORDS_FILE).read_bytes().splitlines()]


def load_manifest(run_dir: Path) -> dict:
    return orjson.loads((Path(run_dir) / MANIFEST_FILE).read_bytes())


def ideal_by_id(run_dir: Path, block_size: int | None = None) -> dict[str, int]:
    """`cached_tokens_ideal` per request, as the analyzer computes it from the run folder."""
    from harness.analysis.ideal.walk import with_ideal
    from harness.analysis.loader import load_run

    recs, _ = with_ideal(load_run(run_dir), block_size)
    return dict(
        zip(recs["request_id"], recs["cached_tokens_ideal"].astype(int).tolist(), strict=True)
    )


def by_id(records: list[dict]) -> dict[str, dict]:
    return {r["request_id"]: r for r in records}


@contextlib.asynccontextmanager
async def started_servers(build: Callable[..., Any]) -> AsyncIterator[Callable[..., Any]]:
    """A fixture's server factory: `make(...)` builds a server with `build(...)`, starts it and
    returns it; every server made is stopped when the block ends."""
    started = []

    async def make(*args: Any, **kw: Any) -> Any:
        s = build(*args, **kw)
        await s.start()
        started.append(s)
        return s

    try:
        yield make
    finally:
        for s in started:
            await s.stop()
