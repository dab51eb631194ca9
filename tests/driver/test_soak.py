"""A cycled closed loop holds the passes over the trace that are in flight, not every pass so
far: the soak's memory creep (docs/measurements/soak.md)."""

import asyncio

import pytest

from harness.driver.config import ReplayConfig
from harness.driver.recorder import Recorder
from harness.driver.replay import Replay
from harness.trace.cycles import split_cycled_id
from tests.driver.helpers import load_records, sess, target, trace


@pytest.mark.slow
async def test_a_cycled_replay_lets_finished_passes_go(make_server, tmp_path):
    srv = await make_server(prefix_cache=False, keep_body=False)
    tr = trace(*(sess(f"m{i}", [(8, 2, 0), (8, 2, 0)]) for i in range(4)))
    config = ReplayConfig(load="closed", concurrency=4, max_duration=2.5, drain_s=0.5)
    tgt = target(srv.url, api=config.api)
    await tgt.start(check=False)
    held: list[int] = []
    try:
        with Recorder(tmp_path) as rec:
            replay = Replay(tr, tgt, config, rec)
            run = asyncio.create_task(replay.run())
            while not run.done():
                held.append(len(replay.passes))
                await asyncio.sleep(0.005)
            result = await run
    finally:
        await tgt.close()
    passes = {split_cycled_id(r["session_id"])[1] for r in load_records(tmp_path)}
    # enough passes for the bound below to mean something (850-1,030 in 2.5 s at load 3.6)
    assert result.stopped_by == "max_duration" and len(passes) >= 6, len(passes)
    # 4 slots on 4 main sessions: at most the pass being drawn and the one before it
    assert max(held) <= 2, max(held)
    assert all(r["status"] in ("ok", "cancelled") for r in load_records(tmp_path))
