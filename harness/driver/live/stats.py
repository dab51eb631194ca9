"""Live counters of a replay, read by the progress display and the live metrics endpoint."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReplayStats:
    in_flight: int = 0
    active_sessions: int = 0
    done: int = 0
    failed: int = 0  # error + timeout
    cancelled: int = 0
    output_tokens: int = 0
    recent_ttft: deque = field(default_factory=lambda: deque(maxlen=200))
    # called with each record as it ends (the live metrics endpoint folds them in)
    watchers: list[Callable[[Mapping[str, Any]], None]] = field(default_factory=list)

    def observe(self, rec: Mapping[str, Any]) -> None:
        self.done += 1
        status = rec["status"]
        if status == "cancelled":
            self.cancelled += 1
        elif status != "ok":
            self.failed += 1
        self.output_tokens += sum(rec["chunk_tokens"])
        if rec["t_first_token"] is not None:
            self.recent_ttft.append(rec["t_first_token"] - rec["t_sent"])
        for watch in self.watchers:
            watch(rec)
