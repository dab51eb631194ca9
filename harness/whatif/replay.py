"""The what-if's event loop: a run's requests through in-process engines on modelled time.

Each replica is the reference engine itself (`LLMEngine`: its scheduler, block pool, prefix cache
and tiers) with the simulated runner, stepped here one step at a time: a step's modelled seconds
(the cost model fitted to the run, `fit.py`) move the clock, and requests sent meanwhile join the
next step, as on the virtual clock (`serving/virtual_engine.py`). A request is sent at its
trigger's end here plus its measured gap (`requests.py`), so sends follow the replayed server's
speed; one past the run's measured duration is not sent (the run stopped sending then).
Requests the engine refuses (too long for the pool) end at once as errors, as the server's did.
With `jitter` > 0 each step takes its modelled time x exp(jitter z - jitter^2 / 2) (z standard
normal from `seed`, mean 1): one draw of the run-to-run noise a real server's steps have (`fit.py`).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from harness.driver.routing import Router
from harness.engine.config import EngineConfig
from harness.engine.engine import EngineRequestError, LLMEngine
from harness.engine.runners.cost_model import CostModel
from harness.engine.runners.simulated import SimRunner
from harness.engine.sequence import SamplingParams
from harness.whatif.requests import Prompts, ReplayRequest


@dataclass
class Outcome:
    """What the replay predicts for one request (None where it was not sent, or failed)."""

    sent: float | None = None
    first_token: float | None = None
    done: float | None = None
    cached: int | None = None
    prompt: int = 0
    error: bool = False

    @property
    def ttft(self) -> float:
        assert self.first_token is not None and self.sent is not None
        return self.first_token - self.sent


@dataclass
class Replay:
    config: EngineConfig
    cost: CostModel
    replicas: int = 1
    routing: str = "session_sticky"
    stop_sending_at: float = float("inf")
    jitter: float = 0.0  # sigma of a step's log time about the model's (0: exact)
    seed: int = 0
    # Where a step ends: called with (its start, its modelled seconds), gives its seconds
    # (`exact.RunClock`: the run's own steps); None: the modelled seconds.
    clock: Callable[[float, float], float] | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    steps: int = 0  # the steps the last run took, every replica's
    # Called before each step with (replica, the step's start, its engine): a way to watch the
    # cache model step by step (benchmarks/vllm_kv_events.py); None costs nothing.
    observe: Callable[[int, float, LLMEngine], None] | None = None

    def run(self, requests: list[ReplayRequest], prompts: Prompts) -> list[Outcome]:
        self.outcomes, self.steps = [Outcome() for _ in requests], 0
        engines = [self._engine() for _ in range(self.replicas)]
        router = Router([f"replica-{i}" for i in range(self.replicas)], self.routing)
        waiters: dict[int, list[int]] = {}
        due: list[tuple[float, int, int]] = []  # (send time, tie order, request)
        tasks: list[int] = []  # a closed loop's next tasks, in the order the run started them
        for i, r in enumerate(requests):
            if r.new_task:
                tasks.append(i)
            elif r.trigger is None:
                heapq.heappush(due, (r.t_sent, i, i))
            else:
                waiters.setdefault(r.trigger, []).append(i)
        loop = _Loop(self, requests, prompts, engines, router, waiters, due)
        loop.tasks = tasks[::-1]
        loop.run()
        return self.outcomes

    def _engine(self) -> LLMEngine:
        config = self.config
        runner = SimRunner(config)
        runner.cost = self.cost  # the fitted model, not a file's
        return LLMEngine(config, runner)


_TIE_S = 2e-6


class _Loop:
    def __init__(self, replay, requests, prompts, engines, router, waiters, due) -> None:
        self.replay, self.requests, self.prompts = replay, requests, prompts
        self.engines, self.router, self.waiters, self.due = engines, router, waiters, due
        self.clocks = [0.0] * len(engines)  # when each replica's current step ends
        self.woken = [False] * len(engines)  # its next step was started by a send to it idle
        self.where: dict[str, tuple[int, int]] = {}  # request id -> (index, replica)
        self.released = len(requests)  # tie order of the sends released so far
        self.tasks: list[int] = []  # next tasks, the next last
        # A task ends when all its requests have: then the loop starts the next one.
        self.left = Counter(r.root for r in requests)
        self.rng = np.random.default_rng(replay.seed) if replay.jitter > 0 else None

    def run(self) -> None:
        while True:
            busy = [k for k, e in enumerate(self.engines) if e.has_unfinished()]
            next_send = self.due[0][0] if self.due else float("inf")
            k = min(busy, key=lambda j: self.clocks[j], default=None)
            next_step = self.clocks[k] if k is not None else float("inf")
            if next_send == next_step == float("inf"):
                return
            if self._send_first(next_send, next_step, k):
                t, _, i = heapq.heappop(self.due)
                self._send(i, t)
            else:
                assert k is not None
                self._step(k)

    def _send_first(self, send: float, step: float, k: int | None) -> bool:
        """A send at the instant a step starts misses it when the step follows the last one:
        the engine computes it as soon as the last ends, before the driver has read the outputs
        and sent what they released. A step that a send woke (an idle engine) takes every send
        of that instant. Records are stamped to the microsecond, hence the tolerance."""
        if abs(send - step) > _TIE_S:
            return send < step
        return k is not None and self.woken[k]

    def _send(self, i: int, t: float) -> None:
        r, out = self.requests[i], self.replay.outcomes[i]
        if t > self.replay.stop_sending_at:
            return  # the run had stopped sending: nothing waits on it either
        out.sent = t
        ids = self.prompts.token_ids(r.session, r.turn)
        out.prompt = len(ids)
        k = self.router.pick(r.root)
        engine = self.engines[k]
        params = SamplingParams(max_tokens=r.gen_tokens, min_tokens=r.gen_tokens, ignore_eos=True)
        try:
            engine.validate(str(i), ids, SamplingParams(max_tokens=r.max_tokens))
        except EngineRequestError:
            out.error = True
            self._end(i, k, t)
            return
        if not engine.has_unfinished():  # idle: its next step starts now, or when its last ends
            self.woken[k] = t >= self.clocks[k]
            self.clocks[k] = max(self.clocks[k], t)
        engine.add_request(str(i), ids, params, validated=True)
        self.where[str(i)] = (i, k)

    def _step(self, k: int) -> None:
        engine = self.engines[k]
        runner = engine.runner
        before = runner.sim_time_s
        self.woken[k] = False
        if self.replay.observe is not None:
            self.replay.observe(k, self.clocks[k], engine)
        outputs = engine.step()
        self.replay.steps += 1
        seconds = runner.sim_time_s - before
        if self.replay.clock is not None:
            seconds = self.replay.clock(self.clocks[k], seconds)
        if self.rng is not None:
            sigma = self.replay.jitter
            seconds *= math.exp(sigma * self.rng.standard_normal() - sigma * sigma / 2)
        self.clocks[k] += seconds
        t = self.clocks[k]
        for o in outputs:
            i, _ = self.where[o.request_id]
            out = self.replay.outcomes[i]
            if out.first_token is None:
                out.first_token, out.cached = t, o.cached_tokens
            if o.finished:
                del self.where[o.request_id]
                self._end(i, k, t)

    def _end(self, i: int, k: int, t: float) -> None:
        self.replay.outcomes[i].done = t
        self.router.release(k)
        released = self.waiters.pop(i, [])
        root = self.requests[i].root
        self.left[root] -= 1
        if not self.left[root] and self.tasks:
            released.append(self.tasks.pop())
        # Sends of one instant go in the order they were released, as the driver's timers do.
        for j in released:
            self.released += 1
            heapq.heappush(self.due, (t + self.requests[j].gap, self.released, j))
