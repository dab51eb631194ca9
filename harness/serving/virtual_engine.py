"""The in-process engine on the caller's event loop: each step takes its modelled time there.

`AsyncEngine` with the step loop as a task instead of a thread, for the simulated runner on a
virtual clock (the driver's `VirtualLoop`): a step is computed at once, then the task
sleeps the step's modelled seconds (the cost model's, tier transfers included) on the loop's
clock, and its outputs arrive when the step would have ended. Requests posted meanwhile join the
next step, as they do on the thread. With nothing to do the task waits for the next request, so
on a virtual loop time jumps straight to the driver's next event. No thread, no wall-time sleep:
the engine's timings are the cost model's exactly, whatever the host is doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable

from harness.engine.engine import LLMEngine, RequestOutput
from harness.errors import EngineError
from harness.serving.async_engine import AsyncEngine, SamplingParams

log = logging.getLogger(__name__)


class VirtualEngine(AsyncEngine):
    def __init__(self, config) -> None:
        if config.runner != "simulated":
            raise EngineError("field 'clock': virtual needs runner: simulated")
        super().__init__(config)
        self._task: asyncio.Task | None = None
        self._work = asyncio.Event()
        self._direct: dict[str, Callable[[RequestOutput], None]] = {}

    async def start(self) -> None:
        if self._task is not None:
            return
        self._engine = LLMEngine(self.config)  # no model to build: the simulated runner is cheap
        self._stopping = False
        self._task = asyncio.create_task(self._step_loop(), name="engine-step-loop")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._inbox.extend(("abort", rid) for rid in list(self._queues))
        self._stopping = True
        self._work.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def _post(self, msg) -> None:
        self._inbox.append(msg)
        self._work.set()

    def generate(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        on_output: Callable[[RequestOutput], None] | None = None,
    ) -> AsyncGenerator[RequestOutput, None]:
        """`AsyncEngine.generate`; with `on_output`, a request's outputs before its last are
        handed to it as the step ends instead of waking the request's task for each (a task
        switch per token is most of a request's cost on a virtual clock). The loop's time stands
        still meanwhile, so a caller stamping them then reads what the woken task would have."""
        outputs = super().generate(request_id, prompt_token_ids, params)
        if on_output is not None:
            self._direct[request_id] = on_output
        return outputs

    def _deliver(self, out: RequestOutput) -> None:
        rid = out.request_id
        direct = self._direct.get(rid)
        if direct is not None:
            if not out.finished and rid in self._queues:  # still streamed: not closed early
                direct(out)
                return
            del self._direct[rid]
        self._put(out)

    async def _step_loop(self) -> None:
        engine = self.engine
        clock = engine.runner  # the simulated runner adds up its steps' modelled seconds
        # asyncio.sleep, not the driver's clock.sleep: serving may not import the driver (one
        # loop lookup per step, ~1 us, is nothing beside a step's work)
        pause = asyncio.sleep
        while True:
            inbox, self._inbox = self._inbox, []
            self._apply(engine, inbox)
            if self._stopping and not inbox:
                for out in engine.fail_all("engine stopped"):
                    out.finish_reason = "abort"
                    self._deliver(out)
                return
            if not engine.has_unfinished():
                if not self._stopping:
                    self._work.clear()
                    await self._work.wait()
                continue
            before = clock.sim_time_s
            try:
                outputs = engine.step()
            except Exception as exc:  # a runner failure fails the in-flight requests, not the loop
                log.exception("engine step failed")
                outputs = engine.fail_all(f"{type(exc).__name__}: {exc}")
            await pause(clock.sim_time_s - before)
            for out in outputs:
                self._deliver(out)
