"""A real Prometheus (Debian's package) scrapes a live `harness run` on the simulated runner:
the scraped request count and a TTFT quantile match the run's summary.json, and every query of
the Grafana board (dashboards/) parses and returns data for the run."""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from harness.app.cli import main
from harness.export.catalog import LATENCY_BUCKETS
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
BOARD = ROOT / "dashboards" / "harness-live.grafana.json"
PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="prometheus not installed (Debian's package; .ci/run installs it)",
    ),
]
# the quickstart on the simulated runner, a few seconds; prompts past 1,100 tokens are refused,
# so the run has failures (for the board's failures panel) as well as ok requests
RUN_SETS = (
    "target.engine.options.runner=simulated",
    "target.engine.options.max_model_len=1100",
    "load.max_duration_s=5",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=HANG_S) as resp:
        return json.loads(resp.read())


class Prometheus:
    """The prometheus binary on loopback, scraping one target every 250 ms into a temp folder."""

    def __init__(self, folder: Path, target_port: int) -> None:
        self.port = _free_port()
        config = folder / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 250ms, scrape_timeout: 200ms}\n"
            "scrape_configs:\n"
            f"  - job_name: harness\n    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
        )
        self.log = (folder / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self._ready()

    def _ready(self) -> None:
        deadline = time.monotonic() + HANG_S  # a guard: a dead process fails at once
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {self.proc.returncode}")
            try:
                urllib.request.urlopen(self.url + "/-/ready", timeout=1).read()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("prometheus did not become ready")

    def query(self, expr: str) -> list:
        data = _get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert data["status"] == "success", data
        return data["data"]["result"]

    def query_range(self, expr: str, start: float, end: float) -> list:
        args = {"query": expr, "start": start, "end": end, "step": "0.5"}
        data = _get(f"{self.url}/api/v1/query_range?" + urllib.parse.urlencode(args))
        assert data["status"] == "success", (expr, data)
        return data["data"]["result"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """(Prometheus, the run folder, the run's start and end, wall clock) after a live run."""
    folder = tmp_path_factory.mktemp("prometheus")
    port = _free_port()
    prom = Prometheus(folder, port)
    try:
        out = folder / "run"
        sets = [a for s in RUN_SETS for a in ("--set", s)]
        quickstart = str(ROOT / "scenarios" / "quickstart.yaml")
        start = time.time()
        code = main(
            ["run", quickstart, "-o", str(out), "--quiet", "--metrics-port", str(port), *sets]
        )
        assert code in (0, 1), code  # 1: the refused prompts make more than 1 % fail
        yield prom, out, start, time.time()
    finally:
        prom.stop()


def _value(result: list) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def _bucket_of(value: float) -> int:
    return next(i for i, b in enumerate(LATENCY_BUCKETS) if value <= b)


def test_scraped_count_and_ttft_quantile_match_the_summary(scraped):
    prom, out, _, _ = scraped
    summary = json.loads((out / "summary.json").read_text())
    run = f'run_id="{out.name}",phase="measure"'
    # the final scrape's values (the run waited for it); last_over_time skips the stale markers
    # Prometheus writes once the endpoint has closed
    count = prom.query(f"sum(last_over_time(harness_requests_total{{{run}}}[5m]))")
    assert _value(count) == summary["requests_total"]
    failed = prom.query(f"sum(last_over_time(harness_request_errors_total{{{run}}}[5m]))")
    assert _value(failed) == summary["requests_failed"] > 0
    ttft = "gen_ai_client_operation_time_to_first_chunk_seconds_bucket"
    for q, key in ((0.5, "p50"), (0.9, "p90")):
        expr = f"histogram_quantile({q}, sum by (le) (last_over_time({ttft}{{{run}}}[5m])))"
        scraped_q, exact = _value(prom.query(expr)), summary["ttft_s"][key]
        # within the bucket resolution: the same bucket as the exact quantile, or the next
        assert abs(_bucket_of(scraped_q) - _bucket_of(exact)) <= 1, (key, scraped_q, exact)


def _board_queries() -> list[tuple[str, str]]:
    board = json.loads(BOARD.read_text())
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def test_every_board_query_returns_data_for_the_live_run(scraped):
    prom, out, start, end = scraped
    values = {"$run_id": out.name, "$endpoint": ".*", "$phase": ".*", "$__rate_interval": "2s"}
    empty = []
    for title, expr in _board_queries():
        for name, value in values.items():
            expr = expr.replace(name, value)
        points = [
            float(v) for series in prom.query_range(expr, start, end) for _, v in series["values"]
        ]
        if not any(math.isfinite(v) for v in points):
            empty.append(f"{title}: {expr}")
    assert empty == []
