"""The virtual clock: time jumps to the next timer, the driver stamps on it, the engine's steps
take exactly their modelled time on it, and anything but the in-process simulated engine is
refused in one line."""

import asyncio

import pytest

from harness.app.build import virtual_clock
from harness.app.scenario import validate
from harness.driver import clock
from harness.driver.config import ReplayConfig
from harness.driver.engine_target import EngineTarget
from harness.driver.recorder import collect
from harness.driver.replay_into import run_replay
from harness.driver.target import RequestSpec
from harness.engine.config import EngineConfig
from harness.errors import EngineError, InputError
from harness.schema import new_record
from tests.driver.helpers import load_records, sess, trace


def _run(coro):
    with asyncio.Runner(loop_factory=clock.VirtualLoop) as runner:
        return runner.run(coro)


def test_time_jumps_to_the_next_timer_and_stands_still_between():
    async def main():
        seen = []

        async def sleeper(s: float):
            await asyncio.sleep(s)
            seen.append((s, clock.now()))

        t0 = clock.now()
        await asyncio.gather(sleeper(3600.0), sleeper(0.5), sleeper(60.0))
        busy_start = clock.now()
        sum(range(200_000))  # work takes no simulated time
        return t0, seen, clock.now() - busy_start

    t0, seen, busy = _run(main())
    assert t0 == 0.0
    assert [s for s, _ in seen] == [0.5, 60.0, 3600.0]
    assert [t for _, t in seen] == pytest.approx([0.5, 60.0, 3600.0], abs=1e-9)
    assert busy == 0.0


def test_a_timeout_fires_on_simulated_time():
    async def main():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(30.0):
                await asyncio.Event().wait()
        return clock.now(), clock.is_virtual()

    t, virtual = _run(main())
    assert t == pytest.approx(30.0)
    assert virtual
    assert not clock.is_virtual()  # outside a virtual loop: the wall clock


def _spec(rid: str, prompt: list[int], max_tokens: int) -> RequestSpec:
    return RequestSpec(
        request_id=rid,
        session_id="s",
        sticky_key="s",
        endpoint=0,
        max_tokens=max_tokens,
        prompt_tokens=len(prompt),
        prompt=prompt,
    )


def test_engine_steps_take_their_modelled_time():
    config = EngineConfig(runner="simulated", clock="virtual", num_gpu_blocks=64)

    async def main():
        target = EngineTarget(config)
        await target.start()
        try:
            rec = new_record(request_id="r", session_id="s", turn=0)
            t0 = clock.now()
            await collect(target, _spec("r", list(range(1000, 1200)), 4), rec, t0)
            return rec, target.engine.engine.runner.sim_time_s
        finally:
            await target.close()

    rec, modelled = _run(main())
    assert rec["status"] == "ok", rec["error"]
    assert rec["completion_tokens"] == 4
    # one request alone: its end is the sum of its steps' modelled seconds, exactly
    assert rec["t_done"] == pytest.approx(modelled, abs=1e-6)
    assert 0 < rec["t_first_token"] < rec["t_done"]


def test_virtual_needs_the_simulated_runner_and_no_store():
    with pytest.raises(EngineError, match="field 'clock': virtual needs runner: simulated"):
        EngineConfig(runner="torch", clock="virtual")
    with pytest.raises(EngineError, match="no kv_store"):
        EngineConfig(runner="simulated", clock="virtual", kv_store="http://127.0.0.1:1")
    with pytest.raises(EngineError, match="'clock'"):
        EngineConfig(clock="sundial")


def _scenario(**target) -> dict:
    options = {"runner": "simulated", "clock": "virtual", "num_gpu_blocks": 64}
    engine = {"options": options, **target}
    return {"name": "v", "workload": {"profile": "workloads/agentx-cpu.yaml"}, "target": engine}


def test_virtual_is_refused_off_the_in_process_engine():
    doc = _scenario()
    assert virtual_clock(validate({**doc, "target": {"engine": doc["target"]}}))
    served = _scenario(mode="http")
    with pytest.raises(InputError, match="target.engine.options.clock.*inprocess"):
        virtual_clock(validate({**served, "target": {"engine": served["target"]}}))
    ray = {**doc, "target": {"engine": doc["target"]}, "execution": {"backend": "ray"}}
    with pytest.raises(InputError, match="one process"):
        virtual_clock(validate(ray))


def _replayed(tr, tmp_path, **config) -> list[dict]:
    """`tr` replayed on simulated time into the in-process simulated engine: its records."""

    async def main():
        target = EngineTarget(EngineConfig(runner="simulated", clock="virtual", num_gpu_blocks=256))
        return await run_replay(tr, target, ReplayConfig(run_id="v", **config), tmp_path)

    _run(main())
    return load_records(tmp_path)


def _families():
    """Think times, a fork and a spawn joined, and joins whose think time is shorter or longer
    than their subagent's run (test_replay.py's traces, with ids of their own)."""
    return trace(
        sess("a", [(8, 4, 0.0), (8, 4, 0.1), (8, 4, 0.2)]),
        sess("p", [(8, 4, 0, ["p.fork", "p.spawn"]), (8, 4, 0)]),
        sess("p.fork", [(8, 20, 0), (8, 20, 0.05)], parent="p", fork_turn=0, mode="fork"),
        sess("p.spawn", [(8, 20, 0)], parent="p", mode="spawn"),
        *[
            s
            for j, think in (("j", 0.1), ("k", 1.0))
            for s in (
                sess(j, [(8, 4, 0, [f"{j}.a1"]), (8, 4, think)]),
                sess(f"{j}.a1", [(8, 4, 0.2), (8, 4, 0.2)], parent=j, mode="spawn"),
            )
        ],
    )


@pytest.mark.parametrize(
    "config",
    [{"concurrency": 2}, {"load": "open", "session_rate": 20, "arrival": "constant"}],
    ids=["closed", "open-constant"],
)
def test_on_a_loop_never_late_each_request_goes_when_scheduled(tmp_path, config):
    """The replay's own schedule, with nothing to make it late: every send at its time exactly
    (on a real loop a busy machine makes sends late, which the client self-check reports)."""
    tr = _families()
    records = _replayed(tr, tmp_path, **config)
    assert len(records) == sum(len(s.turns) for s in tr.sessions) == 16
    assert all(r["status"] == "ok" for r in records)
    sent, scheduled = ([r[k] for r in records] for k in ("t_sent", "t_scheduled"))
    assert sent == pytest.approx(scheduled, abs=1e-6)
    if config.get("load") == "open":
        starts = sorted(
            r["t_scheduled"] for r in records if r["turn"] == 0 and r["agent"] == "main"
        )
        assert starts == pytest.approx([0, 0.05, 0.1, 0.15], abs=1e-9)
