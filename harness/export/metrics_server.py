"""The live metrics endpoint: prometheus_client's HTTP server, in its own thread, serving every
run this process drives (`--metrics-port`), in the Prometheus text exposition format.

The endpoint opens before the first run and closes after the last. Prometheus scrapes at its own
interval, so a run's last figures would be lost between its end and the next scrape: when the
endpoint has been scraped, closing waits for one scrape after the end (at most `linger_s`).
"""

from __future__ import annotations

import sys
import time

from prometheus_client import CollectorRegistry, start_http_server

from harness.errors import InputError
from harness.export.collector import LiveCollector
from harness.export.run_metrics import RunLabels, RunMetrics

# The longest a command waits, after its last run, for the final scrape (Prometheus' default
# scrape interval is one minute).
LINGER_S = 61.0


class MetricsServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = LiveCollector()
        self.registry.register(self.collector)
        try:
            self._server, self._thread = start_http_server(port, host, self.registry)
        except OSError as exc:
            raise InputError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
                field="--metrics-port",
            ) from None
        self.port = int(self._server.server_port)
        self._last_end: float | None = None
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/metrics"

    def ended(self) -> None:
        """A run's replay has ended: its figures are final (a scrape from now on has them)."""
        self._last_end = time.monotonic()

    def run(self, labels: RunLabels) -> RunMetrics:
        """A new run's metrics, served from now on (and after it ends, with its final figures)."""
        metrics = RunMetrics(labels)
        self.collector.add(metrics)
        return metrics

    def close(self, linger_s: float = LINGER_S) -> None:
        """Stop serving, once a scrape after the last run's end has read its final figures (a
        scrape during the analysis counts; nothing is waited for an endpoint no one has read),
        or after `linger_s`."""
        try:
            if self.collector.scraped and linger_s > 0:
                self._final_scrape(linger_s)
        finally:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)

    def _final_scrape(self, linger_s: float) -> None:
        ended = self._last_end if self._last_end is not None else time.monotonic()
        if self.collector.scraped[-1] > ended:
            return
        wait = min(linger_s, self._interval_s())
        print(
            f"harness: metrics: waiting up to {wait:.0f} s for a last scrape of {self.url}",
            file=sys.stderr,
            flush=True,
        )
        try:
            while time.monotonic() - ended < wait:  # from the end: the analysis' time counts
                if self.collector.scraped[-1] > ended:
                    return
                time.sleep(0.05)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, close now
            return

    def _interval_s(self) -> float:
        """Twice the longest gap between the scrapes so far, and a second more (a scraper's
        interval, with its jitter); LINGER_S after a single scrape, whose interval is unknown."""
        t = self.collector.scraped
        if len(t) < 2:
            return LINGER_S
        return 2 * max(b - a for a, b in zip(t, t[1:], strict=False)) + 1.0
