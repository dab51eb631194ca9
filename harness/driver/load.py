"""When main sessions start: the arrival schedules of open-loop and timestamp replay.

Closed loop has no schedule (a session starts when a slot frees); the others yield
(intended start time, session) in order. Subagents are not scheduled: they start when their
parent's spawning turn ends.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from harness.driver.config import ReplayConfig
from harness.trace.model import Session


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
