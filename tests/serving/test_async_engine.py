"""The async API: streaming, aborts, validation, and a step loop that never blocks the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from harness.errors import EngineError
from harness.serving.async_engine import AsyncEngine, EngineRequestError, SamplingParams
from tests.engine.conftest import greedy, prompt, tiny


@pytest.fixture
async def engine():
    eng = AsyncEngine(tiny(num_gpu_blocks=1200, max_num_batched_tokens=4096))
    await eng.start()
    yield eng
    await eng.stop()


async def collect(engine: AsyncEngine, rid: str, p: list[int], params: SamplingParams) -> list:
    return [out async for out in engine.generate(rid, p, params)]


async def test_streams_one_output_per_token_and_finishes(engine):
    outs = await collect(engine, "a", prompt(0, 50), greedy(5))
    assert [len(o.new_token_ids) for o in outs] == [1] * 5
    assert [o.finished for o in outs] == [False] * 4 + [True]
    last = outs[-1]
    assert (
        last.finish_reason == "length" and last.completion_tokens == 5 and last.prompt_tokens == 50
    )
    assert last.first_scheduled_at is not None and last.cached_tokens == 0


async def test_concurrent_requests_share_the_prefix_cache(engine):
    p = prompt(1, 80)
    await collect(engine, "warm", p, greedy(2))
    results = await asyncio.gather(
        *(collect(engine, f"r{i}", p + [1000 + i] * 20, greedy(3)) for i in range(4))
    )
    assert all(r[-1].cached_tokens == 80 // 16 * 16 for r in results)
    s = engine.stats()
    assert s.prefix_cache_hits == 4 * 80 and s.requests_finished == 5 and s.num_running == 0


@pytest.mark.slow
async def test_the_event_loop_keeps_ticking_during_a_long_prefill(engine):
    """The loop runs while a step computes: a tick of the loop's clock lands inside a step of the
    prefill (order on one clock, not a bound on how long anything took)."""
    ticks, steps, stop = [], [], asyncio.Event()
    inner = engine.engine
    step = inner.step

    def timed_step():
        t = time.perf_counter()
        try:
            return step()
        finally:
            steps.append((t, time.perf_counter()))

    async def ticker():
        while not stop.is_set():
            await asyncio.sleep(0.005)
            ticks.append(time.perf_counter())

    inner.step = timed_step  # the engine thread looks it up at every step
    task = asyncio.create_task(ticker())
    try:
        await collect(engine, "long", prompt(2, 12_000), greedy(1))
    finally:
        stop.set()
        await task
        del inner.step
    assert len(steps) >= 3  # 12,000 prompt tokens, 4,096 a step
    inside = [t for t in ticks if any(a < t < b for a, b in steps)]
    assert inside, (steps, ticks)


async def test_cancelling_the_consumer_aborts_the_request(engine):
    it = engine.generate("c", prompt(3, 30), greedy(10_000 - 30))
    first = await it.__anext__()
    assert not first.finished
    await it.aclose()
    await wait_idle(engine)
    assert engine.stats().num_running == 0 and engine.engine.pool.num_free == 1200


async def test_task_cancellation_aborts_the_request(engine):
    started = asyncio.Event()

    async def consume():
        async for _ in engine.generate("t", prompt(4, 30), greedy(5000)):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_idle(engine)


async def test_abort_ends_the_stream_with_reason_abort(engine):
    it = engine.generate("x", prompt(5, 30), greedy(5000))
    await it.__anext__()
    await engine.abort("x")
    outs = [o async for o in it]
    assert outs[-1].finished and outs[-1].finish_reason == "abort"
    await wait_idle(engine)


@pytest.mark.parametrize(
    "p,params,match",
    [
        ([], greedy(1), "empty"),
        ([5, 32_000], greedy(1), "token 1"),
        ([5, -1], greedy(1), "token 1"),
        ([5, "a"], greedy(1), "token 1"),
        ([5] * 32_768, greedy(1), "max_model_len"),
        ([5], SamplingParams(max_tokens=0), "max_tokens"),
        ([5], SamplingParams(max_tokens=2, min_tokens=3), "min_tokens"),
        ([5], SamplingParams(max_tokens=2, temperature=-1.0), "temperature"),
        ([5], SamplingParams(max_tokens=2, stop_token_ids=(40_000,)), "stop_token_ids"),
        ([5] * 19_500, greedy(1), "KV cache"),
    ],
)
@pytest.mark.slow
async def test_invalid_requests_raise_before_streaming(engine, p, params, match):
    with pytest.raises(EngineRequestError, match=match):
        engine.generate("bad", p, params)
    assert engine.stats().num_waiting == 0


async def test_duplicate_in_flight_id_is_refused(engine):
    it = engine.generate("dup", prompt(6, 20), greedy(5000))
    with pytest.raises(EngineRequestError, match="already in flight"):
        engine.generate("dup", prompt(6, 20), greedy(1))
    await it.aclose()


async def test_stop_aborts_in_flight_and_is_idempotent():
    eng = AsyncEngine(tiny(runner="simulated", sim_time_scale=0.0))
    with pytest.raises(EngineError, match="not started"):
        eng.generate("a", [5], greedy(1))
    await eng.start()
    it = eng.generate("a", prompt(7, 20), greedy(3000))
    await it.__anext__()
    await eng.stop()
    outs = [o async for o in it]
    assert outs[-1].finish_reason == "abort"
    await eng.stop()


async def wait_idle(engine: AsyncEngine) -> None:
    for _ in range(200):
        s = engine.stats()
        if s.num_running == 0 and s.num_waiting == 0:
            engine.engine.scheduler.check_invariants()
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"engine not idle: {engine.stats()}")
