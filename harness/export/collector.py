"""The scrape: every run's figures as Prometheus metric families (prometheus_client's custom
collector), one family per metric of the catalog with a sample set per run and label set."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from harness.export import catalog
from harness.export.buckets import Buckets
from harness.export.run_metrics import RunMetrics
from harness.export.series import Series


class LiveCollector:
    """Registered once in the endpoint's registry; runs are added as they start."""

    def __init__(self) -> None:
        self.runs: list[RunMetrics] = []
        self.scraped: list[float] = []  # monotonic times of the scrapes so far
        self._lock = threading.Lock()

    def add(self, run: RunMetrics) -> None:
        with self._lock:
            self.runs.append(run)

    def collect(self) -> Iterator[Metric]:
        began = time.monotonic()  # what this scrape reads was folded before this instant
        with self._lock:
            runs = list(self.runs)
        families = _families()
        for run in runs:
            for key, s in run.snapshot().items():
                _add_series(families, run.request_labels(key), s)
            _add_run(families, run)
        yield from families.values()
        self.scraped.append(began)


def _families() -> dict[str, Metric]:
    made: dict[str, Metric] = {}
    for m in catalog.ALL:
        kind = {
            "counter": CounterMetricFamily,
            "gauge": GaugeMetricFamily,
            "histogram": HistogramMetricFamily,
        }[m.kind]
        made[m.name] = kind(m.name, m.help, labels=m.labels)
    return made


def _add_series(families: dict[str, Metric], labels: list[str], s: Series) -> None:
    for status, n in sorted(s.status.items()):
        families[catalog.REQUESTS.name].add_metric([*labels, status], n)  # type: ignore[attr-defined]
    for error, n in sorted(s.errors.items()):
        families[catalog.ERRORS.name].add_metric([*labels, error], n)  # type: ignore[attr-defined]
    for metric, value in (
        (catalog.PROMPT_TOKENS, s.prompt),
        (catalog.CACHED_TOKENS, s.cached),
        (catalog.CACHE_BASE, s.cache_base),
        (catalog.OUTPUT_TOKENS, s.output),
    ):
        families[metric.name].add_metric(labels, value)  # type: ignore[attr-defined]
    _histogram(families, catalog.TOKEN_USAGE, [*labels, "input"], s.usage_in)
    _histogram(families, catalog.TOKEN_USAGE, [*labels, "output"], s.usage_out)
    for metric, buckets in (
        (catalog.DURATION, s.duration),
        (catalog.TTFT, s.ttft),
        (catalog.TPOT, s.tpot),
        (catalog.ITL, s.itl.buckets),
    ):
        _histogram(families, metric, labels, buckets)


def _histogram(families, metric: catalog.Metric, labels: list[str], b: Buckets) -> None:
    families[metric.name].add_metric(labels, b.cumulative(), b.total)


def _add_run(families: dict[str, Metric], run: RunMetrics) -> None:
    r = run.labels
    in_flight, sessions = run.in_flight()
    gauges = [
        (catalog.IN_FLIGHT, in_flight),
        (catalog.SESSIONS, sessions),
        (catalog.RUN_START, run.started),
        (catalog.TARGET, r.concurrency),
        (catalog.IDEAL, r.ideal_hit),
    ]
    for metric, value in gauges:
        if value is not None:
            families[metric.name].add_metric([r.run_id], value)  # type: ignore[attr-defined]
    info = [r.run_id, r.scenario, r.target, r.api, r.model, r.load]
    families[catalog.RUN_INFO.name].add_metric(info, 1)  # type: ignore[attr-defined]
