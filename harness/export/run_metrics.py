"""One run's live metrics: its series by label set, folded from each record the driver finishes,
and its gauges, read from the driver's live counters when scraped."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.driver.live.stats import ReplayStats
from harness.export.series import Series

CALL_KINDS = {"main": "main", "sub": "subagent"}


@dataclass(frozen=True)
class RunLabels:
    """What names a run on every series and on its info metric."""

    run_id: str
    api: str
    scenario: str = ""
    target: str = ""
    model: str = ""
    load: str = ""
    concurrency: int | None = None  # closed loop: the tasks held in flight
    ideal_hit: float | None = None  # the trace's ideal prefix-cache hit ratio


@dataclass
class RunMetrics:
    labels: RunLabels
    stats: ReplayStats | None = None
    started: float = field(default_factory=time.time)
    series: dict[tuple[str, str, str], Series] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, stats: ReplayStats) -> None:
        """Watch `stats`: every record it observes is folded in; its gauges are read on scrape."""
        self.stats, self.started = stats, time.time()
        stats.watchers.append(self.observe)

    def observe(self, rec: Mapping[str, Any]) -> None:
        key = (rec["endpoint"] or "", CALL_KINDS.get(rec["agent"], rec["agent"]), rec["phase"])
        with self.lock:  # a scrape (another thread) copies the series under it
            series = self.series.get(key)
            if series is None:
                series = self.series[key] = Series()
            series.fold(rec)

    def snapshot(self) -> dict[tuple[str, str, str], Series]:
        """A consistent copy of the series, their kept replies folded (the driver adds records
        meanwhile, from its own thread)."""
        with self.lock:
            for series in self.series.values():
                series.itl.fold()
            return {k: copy.deepcopy(s) for k, s in self.series.items()}

    def request_labels(self, key: tuple[str, str, str]) -> list[str]:
        endpoint, call_kind, phase = key
        return [self.labels.run_id, endpoint, self.labels.api, call_kind, phase]

    def in_flight(self) -> tuple[int, int]:
        """Requests and sessions under way (0, 0 before the replay starts and after it ends)."""
        stats = self.stats
        return (0, 0) if stats is None else (stats.in_flight, stats.active_sessions)
