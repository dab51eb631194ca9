"""The replay engine: sends a trace's sessions to a Target, faithfully and on one clock.

Every main session is a task; its turns run strictly in order, turn k sent `think_s` after
turn k-1 ended. After a turn that spawns subagents, they start at once (each its own coroutine,
its first turn `think_s` after the spawn) and the parent's next turn waits for all of them (a
join) and then for what is left of its own think time, which runs from the spawning turn's end. Load: closed loop (`concurrency` main sessions in flight, the next starting when one
ends; with `max_duration` the trace is cycled, a fresh salt per cycle, so the load holds), open
loop or trace timestamps (main sessions start at scheduled times, whatever is in flight). A
failed request is recorded; with a retry policy (`config.retry`) the turn is tried again after a
backoff, each attempt its own record; otherwise the session goes on: the offered load follows
the trace, not the server's health.

The run clock is `clock.now() - t0`. `t_scheduled` is when a request was meant to go
(arrival time, or previous end + think time); `t_sent` when it went.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from harness.driver import clock
from harness.driver.config import ReplayConfig
from harness.driver.live.stats import ReplayStats
from harness.driver.load import Task, TaskSource, arrivals
from harness.driver.passes import Passes
from harness.driver.recorder import Recorder, collect, ended_at
from harness.driver.routing import Router
from harness.driver.target import RequestSpec, Target
from harness.schema import Record, new_record
from harness.trace.cycles import cycled_id
from harness.trace.model import Session, Trace


@dataclass
class ReplayResult:
    status: str  # "complete" | "interrupted"
    duration_s: float
    sessions_started: int
    requests: int
    by_status: dict = field(default_factory=dict)
    errors_by_class: dict = field(default_factory=dict)
    # how the run ended: "trace_end" | "max_duration" | "max_requests" | "max_sessions" | "signal"
    stopped_by: str | None = None
    unsent: int = 0  # the trace's requests never sent (a stop before the trace's end)


class Replay:
    """`schedule` (open loop / timestamps) replaces the arrivals drawn from `config`: a caller that
    shards one run's sessions (harness.distributed) passes each shard its part of the global plan.
    """

    def __init__(
        self,
        trace: Trace,
        target: Target,
        config: ReplayConfig,
        recorder: Recorder,
        *,
        schedule: list[tuple[float, Session]] | None = None,
        stats: ReplayStats | None = None,
    ) -> None:
        self.trace, self.target, self.config, self.recorder = trace, target, config, recorder
        self.schedule = schedule
        self.passes = Passes(trace, config)  # the prompts of each pass over the trace
        self.task_source = TaskSource(trace.main_sessions, config)
        self.router = Router(target.endpoints, config.routing)
        self.stats = stats if stats is not None else ReplayStats()  # a caller's, to watch it
        self.t0 = clock.now()
        self.sent = 0
        self.sessions_started = 0
        self.stopped_by: str | None = None
        self.think_capped = {"pauses": 0, "seconds_cut": 0.0}  # pauses shortened by think_cap_s
        self.interrupted = False
        self.started = False  # run() was called: from now a signal interrupts the replay
        self.finished = False  # run() returned: the replay itself says how it ended
        self._stop = asyncio.Event()
        # in spawn order (a set's would follow addresses): cancelling goes the same way every run
        self._tasks: dict[asyncio.Task, None] = {}
        self._timers: list[asyncio.TimerHandle] = []
        self.in_flight: dict[str, Record] = {}  # request id -> its record, while it is in flight
        self._encode = getattr(target, "encode", None)  # the body's encoding, done before t_sent

    def now(self) -> float:
        return clock.now() - self.t0

    # ---- the run ------------------------------------------------------------------------------

    async def run(self, t0: float | None = None) -> ReplayResult:
        """`t0`: a perf_counter instant (now or later) to use as the run clock's origin, so
        several processes can share one start; the run waits for it. Default: now."""
        self.passes.prepare()  # before the clock: a first prompt's one-off loading is not lateness
        if t0 is not None:
            await asyncio.sleep(max(0.0, t0 - clock.now()))
        self.started = True
        self.t0 = clock.now() if t0 is None else t0
        if self.config.max_duration is not None:
            loop = asyncio.get_running_loop()
            # from the clock's origin, which a shared start (t0) may have put in the past
            until = max(0.0, self.config.max_duration - self.now())
            self._timers.append(loop.call_later(until, self._duration_reached))
        if self.config.load == "closed":
            tasks = iter(self.task_source)
            for _ in range(self.config.concurrency):
                self._spawn(self._worker(tasks))
        else:
            self._spawn(self._arrivals())
        try:
            while self._tasks:
                await asyncio.wait(set(self._tasks))
        except asyncio.CancelledError:  # the caller was cancelled: leave the records consistent
            self.interrupt()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            raise
        finally:
            for h in self._timers:
                h.cancel()
        self.finished = True
        c = self.recorder.counts()
        return ReplayResult(
            status="interrupted" if self.interrupted else "complete",
            duration_s=self.now(),
            sessions_started=self.sessions_started,
            requests=c["requests"],
            by_status=c["by_status"],
            errors_by_class=c["errors_by_class"],
            stopped_by=self.ending,
            unsent=self.unsent,
        )

    @property
    def ending(self) -> str | None:
        """What ended the replay; None while it runs or when an exception ended it."""
        if self.interrupted:
            return "signal"
        if not self.finished:
            return None
        return self.stopped_by or self.task_source.stopped_by or "trace_end"

    @property
    def running(self) -> bool:
        """Sending or draining: a signal interrupts it (before, it cancels the preflight)."""
        return self.started and not self.finished

    @property
    def phase(self) -> str:
        """Where the run is: preflight (not sending yet), warmup, run, drain (past its stop,
        in flight requests finishing) or done."""
        if not self.started:
            return "preflight"
        if self.finished:
            return "done"
        if self._stop.is_set():
            return "drain"
        c = self.config
        return "warmup" if self.sent < c.warmup_requests or self.now() < c.warmup_s else "run"

    @property
    def sending_stopped(self) -> bool:
        """A limit, a signal or a failure stopped new sends (what is in flight may still finish)."""
        return self._stop.is_set()

    @property
    def unsent(self) -> int:
        """The trace's requests (one pass) that were never sent."""
        return max(0, sum(len(s.turns) for s in self.trace.sessions) - self.sent)

    def interrupt(self) -> None:
        """Ctrl-C / SIGTERM: stop sending and cancel what is in flight (recorded `cancelled`)."""
        self.interrupted = True
        self._stop.set()
        for task in list(self._tasks):
            task.cancel()

    def stop(self, reason: str) -> None:
        """Stop sending and cancel what is in flight, for `reason` (e.g. "disk_full")."""
        self._halt(reason)
        self._cancel_all()

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks[task] = None
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task) -> None:
        self._tasks.pop(task, None)

    def _halt(self, reason: str) -> None:
        if not self._stop.is_set():
            self.stopped_by = reason
            self._stop.set()

    def _duration_reached(self) -> None:
        self._halt("max_duration")
        # In-flight requests may finish; after the drain window they are cancelled.
        self._timers.append(
            asyncio.get_running_loop().call_later(self.config.drain_s, self._cancel_all)
        )

    def _cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _worker(self, tasks: Iterator[Task]) -> None:
        """Closed loop: one slot, running tasks back to back for as long as the run lasts."""
        with contextlib.suppress(asyncio.CancelledError):
            for task in tasks:
                if self._stop.is_set():
                    return
                await self._family(task, self.now())

    async def _arrivals(self) -> None:
        """Open loop / timestamps: start each main session at its time, whatever is in flight."""
        with contextlib.suppress(asyncio.CancelledError):
            plan: Iterable[tuple[float, Session]] = (
                self.schedule
                if self.schedule is not None
                else arrivals([t.session for t in self.task_source], self.config)
            )
            for t, s in plan:
                if not await self._sleep_until(t):
                    return
                self._spawn(self._family(Task(s), t))

    # ---- sessions -----------------------------------------------------------------------------

    async def _family(self, task: Task, start: float) -> None:
        self.sessions_started += 1
        self.passes.family_started(task.cycle)
        try:
            begin: float | None = start
            if task.start_turn:
                begin = await self._history(task.session, task.cycle, task.start_turn, start)
            if begin is not None:
                await self._session(task.session, task.cycle, begin, task.start_turn)
        except asyncio.CancelledError:
            pass  # interrupted or drained: the records are written
        finally:
            self.passes.family_ended(task.cycle, (m.id for m in self.trace.family(task.session.id)))

    async def _history(self, s: Session, cycle: int, first: int, start: float) -> float | None:
        """Mid-trajectory start at turn `first`: the context a session of that age has in the
        server's cache, sent as one warm-up request (phase `warmup`): turn `first - 1`'s prompt
        with one output token. Returns when it ended; None if the run stopped."""
        rec = await self._turn(s, cycle, first - 1, start, warmup=True)
        return None if rec is None else rec["t_done"]

    async def _session(self, s: Session, cycle: int, start: float, first: int = 0) -> None:
        self.stats.active_sessions += 1
        try:
            prev_end, joined = start, start
            for k in range(first, len(s.turns)):
                turn = s.turns[k]
                # A join's think time runs from the spawning turn's end, concurrently with its
                # subagents (as the Weka corpora measure it): it waits only for what is left.
                t_scheduled = max(prev_end + self._think(turn.think_s), joined)
                if not await self._sleep_until(t_scheduled):
                    return
                rec = await self._turn(s, cycle, k, t_scheduled)
                if rec is None:
                    return
                prev_end = joined = ended_at(rec)
                if turn.spawns:
                    kids = [
                        self._session(self.trace.session(c), cycle, prev_end) for c in turn.spawns
                    ]
                    await asyncio.gather(*kids)
                    joined = self.now()
        finally:
            self.stats.active_sessions -= 1

    def _think(self, think_s: float) -> float:
        """The trace's think time, or the cap when it is longer (counted for the manifest)."""
        cap = self.config.think_cap_s
        if cap is None or think_s <= cap:
            return think_s
        self.think_capped["pauses"] += 1
        self.think_capped["seconds_cut"] += think_s - cap
        return cap

    async def _turn(
        self, s: Session, cycle: int, k: int, t_scheduled: float, warmup: bool = False
    ) -> Record | None:
        """One turn: a request, and with retries on, more after a backoff while it fails for a
        reason worth retrying. Returns the final attempt's record (None: the run stopped)."""
        rec = await self._request(s, cycle, k, t_scheduled, 1, warmup)
        while rec is not None and (delay := self.config.retry.delay(rec)) is not None:
            t_scheduled = ended_at(rec) + delay
            if not await self._sleep_until(t_scheduled):
                break
            rec = await self._request(s, cycle, k, t_scheduled, rec["attempt"] + 1, warmup)
        return rec

    async def _sleep_until(self, t: float) -> bool:
        """Wait until run time `t`; False when the run stopped sending meanwhile."""
        delay = t - self.now()
        if delay > 0 and not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stop.wait()
        return not self._stop.is_set()

    # ---- one request --------------------------------------------------------------------------

    def _admit(self) -> bool:
        if self._stop.is_set():
            return False
        if self.config.max_requests is not None and self.sent >= self.config.max_requests:
            self._halt("max_requests")
            return False
        return True

    async def _request(
        self, s: Session, cycle: int, k: int, t_scheduled: float, attempt: int, warmup: bool
    ) -> Record | None:
        if not self._admit():
            return None
        source = self.passes.source(cycle)
        # the streams are read between the steps of a long build, and between it and the send;
        # a prompt built in one step goes at once (a loop turn more is a send later by a turn)
        steps = source.prompt_steps(s.id, k)
        prompt = next(steps)
        if prompt is None:
            while prompt is None:
                await asyncio.sleep(0)
                prompt = next(steps)
            await asyncio.sleep(0)
        if not self._admit():
            return None
        index, self.sent = self.sent, self.sent + 1
        turn = s.turns[k]
        output_tokens = 1 if warmup else turn.output_tokens  # warm-up: the prompt is the point
        sid = cycled_id(s.id, cycle)
        root = cycled_id(self._root(s), cycle) if self.config.follow_parent else sid
        endpoint = self.router.pick(
            root, prompt.body if prompt.messages is None else prompt.messages
        )
        live = source.live is not None
        spec = RequestSpec(
            request_id=f"{sid}:{k}" if attempt == 1 else f"{sid}:{k}#{attempt}",
            session_id=sid,
            sticky_key=root,
            endpoint=endpoint,
            max_tokens=output_tokens,
            prompt_tokens=prompt.n_tokens,
            messages=prompt.messages,
            prompt=prompt.body,
            prompt_json=prompt.ids_json,
            want_text=live,
            tools=prompt.tools,
            # lineage for the routers' session headers
            parent_id=None if s.parent is None else cycled_id(s.parent, cycle),
            root_id=None if s.parent is None else cycled_id(self._root(s), cycle),
        )
        if self._encode is not None:  # CPU work that is not the server's: before the clock starts
            # set once, before anything else sees the spec (never changed after: RequestSpec)
            spec.payload = self._encode(spec)
        rec = new_record(
            run_id=self.config.run_id,
            request_id=spec.request_id,
            session_id=sid,
            parent_session_id=None if s.parent is None else cycled_id(s.parent, cycle),
            agent=s.agent,
            turn=k,
            endpoint=self.target.endpoints[endpoint],
            t_scheduled=round(t_scheduled, 6),
            prompt_tokens_expected=spec.prompt_tokens,
            output_tokens_expected=output_tokens,
            attempt=attempt,
        )
        texts: list[str] | None = [] if live else None
        self.stats.in_flight += 1
        t_sent = self.now()
        phase = "warmup" if warmup else self.config.phase(t_sent, index)
        rec["t_sent"], rec["phase"] = round(t_sent, 6), phase
        self.in_flight[spec.request_id] = rec
        try:
            await collect(self.target, spec, rec, self.t0, texts)
        finally:
            del self.in_flight[spec.request_id]
            if not warmup:  # the target's `Sent` may restamp t_sent: the phase follows the record's
                rec["phase"] = self.config.phase(rec["t_sent"] or t_sent, index)
            self.stats.in_flight -= 1
            self.router.release(endpoint)
            self.recorder.write(rec)
            self.stats.observe(rec)
        if texts is not None and rec["status"] == "ok":
            source.reply(s.id, k, "".join(texts))
        return rec

    def _root(self, s: Session) -> str:
        while s.parent is not None:
            s = self.trace.session(s.parent)
        return s.id
