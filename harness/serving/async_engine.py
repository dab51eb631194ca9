"""The in-process async API: the step loop runs in its own thread, off the caller's event loop.

Requests and aborts go to the thread through a locked inbox; each step's outputs come back with
`loop.call_soon_threadsafe` into one asyncio.Queue per request. Model compute therefore never
delays the caller's clock (the driver's timestamps stay honest).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator
from typing import Literal

from harness.engine.config import EngineConfig
from harness.engine.engine import EngineRequestError, EngineStats, LLMEngine, RequestOutput
from harness.engine.sequence import SamplingParams
from harness.errors import EngineError

__all__ = ["AsyncEngine", "EngineRequestError", "EngineStats", "RequestOutput", "SamplingParams"]

log = logging.getLogger(__name__)
_IDLE_WAIT_S = 0.5  # the thread sleeps this long at most when idle (a new request wakes it)

# What the caller posts to the engine thread: a request to add (its id, prompt, params), or the
# id of one to abort.
_Add = tuple[Literal["add"], tuple[str, list[int], SamplingParams]]
_Abort = tuple[Literal["abort"], str]
_Message = _Add | _Abort


class AsyncEngine:
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.vocab_size = config.model.vocab_size
        self.max_model_len = config.model_len
        self.simulated = config.runner == "simulated"
        self._engine: LLMEngine | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._inbox: list[_Message] = []
        self._queues: dict[str, asyncio.Queue[RequestOutput]] = {}
        self._stopping = False

    @property
    def started(self) -> bool:
        return self._engine is not None

    @property
    def engine(self) -> LLMEngine:
        if self._engine is None:
            raise EngineError("the engine is not started (await AsyncEngine.start() first)")
        return self._engine

    async def start(self) -> None:
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        # Building the model can take seconds: do it off the loop too.
        self._engine = await asyncio.to_thread(LLMEngine, self.config)
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="engine-step-loop", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        if self._thread is None:
            return
        with self._lock:
            self._inbox.extend(("abort", rid) for rid in list(self._queues))
            self._stopping = True
        self._wake.set()
        await asyncio.to_thread(self._thread.join)
        self._thread = None

    # ---- requests -----------------------------------------------------------------------

    def generate(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> AsyncGenerator[RequestOutput, None]:
        """Validate now (raises EngineRequestError), then stream the request's outputs.

        `prompt_token_ids` may also be a 1-D numpy integer array (no list conversion: faster for
        142k-token prompts). It must not be mutated while the request is queued."""
        engine = self.engine
        if self._stopping:
            raise EngineError("the engine is stopping")
        if request_id in self._queues:
            raise EngineRequestError(f"request id {request_id!r} is already in flight")
        engine.validate(request_id, prompt_token_ids, params)
        queue: asyncio.Queue[RequestOutput] = asyncio.Queue()
        self._queues[request_id] = queue
        self._post(("add", (request_id, prompt_token_ids, params)))
        return self._stream(request_id, queue)

    async def _stream(
        self, request_id: str, queue: asyncio.Queue[RequestOutput]
    ) -> AsyncGenerator[RequestOutput, None]:
        finished = False
        try:
            while not finished:
                out = await queue.get()
                finished = out.finished
                yield out
        finally:
            self._queues.pop(request_id, None)
            if not finished:  # cancelled or closed early: the engine stops working on it
                self._post(("abort", request_id))

    async def abort(self, request_id: str) -> None:
        self._post(("abort", request_id))

    def stats(self) -> EngineStats:
        return self.engine.stats()

    def identity(self) -> dict:
        """What produces the timings: the runner and its device (for the simulated runner, the
        device its cost model was calibrated on), so a client can flag simulated runs."""
        runner = self._engine.runner if self._engine is not None else None
        device = getattr(runner, "device_name", None) or self.config.device
        identity = {
            "engine": "agentic-harness reference engine",
            "runner": self.config.runner,
            "simulated": self.simulated,
            "device": device,
            "preset": self.config.preset,
        }
        cost = getattr(runner, "cost", None)
        if self.simulated and cost is not None:
            identity["modelled_device"] = cost.meta.get("device")
        return identity

    def _post(self, msg: _Message) -> None:
        with self._lock:
            self._inbox.append(msg)
        self._wake.set()

    # ---- the step loop (engine thread) --------------------------------------------------

    def _run(self) -> None:
        engine = self.engine
        while True:
            with self._lock:
                inbox, self._inbox = self._inbox, []
                stopping = self._stopping
            self._apply(engine, inbox)
            if stopping and not inbox:
                for out in engine.fail_all("engine stopped"):
                    out.finish_reason = "abort"
                    self._deliver(out)
                return
            if not engine.has_unfinished():
                self._wake.wait(_IDLE_WAIT_S)
                self._wake.clear()
                continue
            try:
                outputs = engine.step()
            except Exception as exc:  # a runner failure fails the in-flight requests, not the loop
                log.exception("engine step failed")
                outputs = engine.fail_all(f"{type(exc).__name__}: {exc}")
            for out in outputs:
                self._deliver(out)

    def _apply(self, engine: LLMEngine, inbox: list[_Message]) -> None:
        for msg in inbox:
            if msg[0] == "add":
                request_id, prompt, params = msg[1]
                try:
                    engine.add_request(request_id, prompt, params, validated=True)
                except EngineRequestError as exc:  # raced with a duplicate id; report, don't die
                    self._deliver(
                        RequestOutput(
                            request_id,
                            [],
                            True,
                            "error",
                            len(prompt),
                            0,
                            0,
                            0,
                            0,
                            None,
                            error=str(exc),
                        )
                    )
            else:
                out = engine.abort_request(msg[1])
                if out is not None:
                    self._deliver(out)

    def _deliver(self, out: RequestOutput) -> None:
        assert self._loop is not None  # start() sets it before the thread runs
        try:
            self._loop.call_soon_threadsafe(self._put, out)
        except RuntimeError:  # the caller's loop closed without stop(): nobody is listening
            with self._lock:
                self._stopping = True

    def _put(self, out: RequestOutput) -> None:
        queue = self._queues.get(out.request_id)
        if queue is not None:
            queue.put_nowait(out)
