"""When main sessions start: the closed loop's task source and the arrival schedules of open-loop
and timestamp replay.

Closed loop has no schedule: a task starts when a slot frees, drawn from `TaskSource` (the
trace's main sessions in order, then, when the run lasts until `max_duration`, the trace again
with fresh content: harness.trace.cycles). The others yield (intended start time, session) in
order. Subagents are not scheduled: they start when their parent's spawning turn ends.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from harness.driver.config import ReplayConfig
from harness.trace.model import Session


@dataclass(frozen=True, slots=True)
class Task:
    """One main session to run with its subagents: which pass over the trace, and where it
    starts (mid-trajectory: turns before `start_turn` are sent first as warm-up history)."""

    session: Session
    cycle: int = 0
    start_turn: int = 0


class TaskSource:
    """The closed loop's tasks, in order, shared by its slots.

    - The trace's main sessions, then the trace again (cycle 1, 2, ...) while the run lasts:
      only with `max_duration` (and `cycle_trace`), else one pass.
    - `max_sessions` bounds the tasks started, over all cycles (`stopped_by` then says so).
    - With `mid_trajectory`, each of the first `concurrency` tasks starts at a turn drawn
      uniformly from its main session's turns (seeded by `seed`), so the run starts with
      sessions at every age, as in steady state, instead of all at their first turn.
    """

    def __init__(self, mains: Sequence[Session], config: ReplayConfig) -> None:
        self.mains, self.config = list(mains), config
        self.rng = np.random.default_rng([config.seed, 1])
        self.stopped_by: str | None = None
        self._tasks = self._draw()

    def __iter__(self) -> Iterator[Task]:
        return self._tasks

    def _draw(self) -> Iterator[Task]:
        c = self.config
        closed = c.load == "closed"
        endless = closed and c.cycle_trace and c.max_duration is not None and bool(self.mains)
        passes = itertools.count() if endless else range(1)
        n = 0
        for cycle in passes:
            for s in self.mains:
                if c.max_sessions is not None and n >= c.max_sessions:
                    self.stopped_by = "max_sessions"  # started ones run to the end
                    return
                start = 0
                if closed and c.mid_trajectory and n < c.concurrency:
                    start = int(self.rng.integers(0, len(s.turns)))
                yield Task(s, cycle, start)
                n += 1


def arrivals(sessions: Sequence[Session], config: ReplayConfig) -> Iterator[tuple[float, Session]]:
    if config.load == "timestamps":
        return _timestamps(sessions, config.time_scale)
    assert config.session_rate is not None  # checked by ReplayConfig
    return _rate(sessions, config.session_rate, config.arrival, config.seed)


def _timestamps(sessions: Sequence[Session], scale: float) -> Iterator[tuple[float, Session]]:
    ordered = sorted(sessions, key=lambda s: s.arrival_s)  # stable: ties keep trace order
    first = ordered[0].arrival_s if ordered else 0.0
    for s in ordered:
        yield (s.arrival_s - first) * scale, s


def _rate(
    sessions: Sequence[Session], rate: float, arrival: str, seed: int
) -> Iterator[tuple[float, Session]]:
    rng = np.random.default_rng(seed)
    t = 0.0
    for i, s in enumerate(sessions):
        if i:  # the first session starts at once
            t += rng.exponential(1.0 / rate) if arrival == "poisson" else 1.0 / rate
        yield t, s
