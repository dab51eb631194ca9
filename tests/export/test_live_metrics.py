"""The live metrics: a run's records folded into Prometheus series whose final values are
summary.json's counts, served over HTTP by prometheus_client, linted by promtool."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import urllib.request
from bisect import bisect_left

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.analysis.summary import analyze_run
from harness.driver.live.stats import ReplayStats
from harness.errors import InputError
from harness.export.catalog import TOKEN_TIME_BUCKETS
from harness.export.collector import LiveCollector
from harness.export.metrics_server import MetricsServer
from harness.export.run_metrics import RunLabels, RunMetrics
from harness.export.token_gaps import BATCH, TokenGaps
from tests.analysis.golden import GOLDEN_RECORDS, write_run
from tests.waits import HANG_S

LABELS = RunLabels("golden", "chat", scenario="s", concurrency=4, ideal_hit=0.9)


class Board:
    """The endpoint's registry and collector, without its HTTP server."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = LiveCollector()
        self.registry.register(self.collector)

    def run(self, labels: RunLabels) -> RunMetrics:
        run = RunMetrics(labels)
        self.collector.add(run)
        return run


@pytest.fixture
def board():
    return Board()


@pytest.fixture
def server():
    s = MetricsServer("127.0.0.1", 0)
    yield s
    s.close(0)


def _watched(board, records) -> ReplayStats:
    stats = ReplayStats()
    board.run(LABELS).attach(stats)
    for rec in records:
        stats.observe(rec)
    return stats


def _samples(board) -> list:
    text = generate_latest(board.registry).decode()
    return [s for f in text_string_to_metric_families(text) for s in f.samples]


def _total(samples, name: str, **labels) -> float:
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


@pytest.mark.slow  # the analysis
def test_final_values_are_the_summary_counts(tmp_path, board):
    summary = analyze_run(write_run(tmp_path / "golden"))
    _watched(board, GOLDEN_RECORDS)
    got = _samples(board)
    measured = {"phase": "measure"}
    for status, n in summary["status_counts"].items():
        assert _total(got, "harness_requests_total", status=status, **measured) == n
    assert _total(got, "harness_requests_total", **measured) == summary["requests_total"]
    assert _total(got, "harness_requests_total", phase="warmup") == 1
    for latency, name in (
        ("ttft_s", "gen_ai_client_operation_time_to_first_chunk_seconds"),
        ("tpot_s", "harness_time_per_output_token_seconds"),
        ("itl_s", "harness_inter_token_latency_seconds"),
        ("e2el_s", "gen_ai_client_operation_duration_seconds"),
    ):
        count = _total(got, f"{name}_count", **measured)
        assert count == summary[latency]["count"], latency
        total = _total(got, f"{name}_sum", **measured)
        assert total == pytest.approx(summary[latency]["mean"] * count), latency
    errors = summary["errors_by_class"]
    for error_type, n in errors.items():
        assert _total(got, "harness_request_errors_total", error_type=error_type) == n
    prompt = _total(got, "harness_cache_reported_prompt_tokens_total", **measured)
    cached = _total(got, "harness_cached_prompt_tokens_total", **measured)
    assert cached / prompt == pytest.approx(summary["cache_hit_rate"])


def test_a_bucket_holds_the_values_at_or_below_its_bound(board):
    rec = dict(GOLDEN_RECORDS[0])
    _watched(board, [rec])
    ttft = rec["t_first_token"] - rec["t_sent"]
    buckets = [
        s
        for s in _samples(board)
        if s.name == "gen_ai_client_operation_time_to_first_chunk_seconds_bucket"
    ]
    for s in buckets:
        bound = float(s.labels["le"])
        assert s.value == (1.0 if ttft <= bound else 0.0), s.labels["le"]


def test_run_gauges_read_the_live_counters(board):
    stats = _watched(board, [])
    stats.in_flight, stats.active_sessions = 5, 3
    got = _samples(board)
    assert _total(got, "harness_requests_in_flight", run_id="golden") == 5
    assert _total(got, "harness_sessions_active", run_id="golden") == 3
    assert _total(got, "harness_target_concurrency", run_id="golden") == 4
    assert _total(got, "harness_run_info", scenario="s", api="chat") == 1


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian's prometheus) absent"
)
def test_promtool_finds_nothing_to_lint(board):
    _watched(board, GOLDEN_RECORDS)
    text = generate_latest(board.registry)
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


@pytest.mark.slow  # closing the server waits for its poll (0.5 s)
def test_a_scrape_after_the_runs_end_is_the_last_one_waited_for(server, capsys):
    _watched(server, GOLDEN_RECORDS[:2])
    body = urllib.request.urlopen(server.url, timeout=HANG_S).read().decode()
    assert 'harness_requests_total{api="chat"' in body
    server.ended()  # the run's figures are final; one scrape from now on has them
    assert server._interval_s() > 0
    urllib.request.urlopen(server.url, timeout=HANG_S).read()  # e.g. while the run is analysed
    server.close(600)
    assert "waiting" not in capsys.readouterr().err  # it had its last scrape: no wait


@pytest.mark.slow
def test_closing_waits_no_longer_than_the_linger(capsys):
    s = MetricsServer("127.0.0.1", 0)
    urllib.request.urlopen(s.url, timeout=HANG_S).read()
    s.ended()
    s.close(0.1)  # scraped before the end, never after: it waits, then gives up
    assert "waiting up to 0 s for a last scrape" in capsys.readouterr().err


def test_a_port_in_use_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InputError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            MetricsServer("127.0.0.1", port)


def test_without_the_extra_the_error_names_it():
    from harness.app.extras import missing_extra

    line = missing_extra(ModuleNotFoundError("x", name="prometheus_client"))
    assert line is not None and "agentic-harness[metrics]" in line


def test_inter_token_gaps_folded_in_batches_are_the_per_chunk_ones():
    """token_gaps folds many replies at once (numpy); a loop over each chunk gives the same."""
    rng = random.Random(2)
    gaps, reference, total = TokenGaps(TOKEN_TIME_BUCKETS), [0] * (len(TOKEN_TIME_BUCKETS) + 1), 0.0
    for _ in range(BATCH * 2 + 10):  # two folds when the batch fills, the rest on reading
        times = sorted(rng.uniform(0, 3) for _ in range(rng.randint(0, 40)))
        tokens = [rng.choice([0, 1, 1, 3]) for _ in times] if rng.random() < 0.8 else []
        gaps.add(times, tokens)
        last = None
        for t, n in zip(times, tokens or [1] * len(times), strict=True):
            if n > 0:
                if last is not None:
                    reference[bisect_left(TOKEN_TIME_BUCKETS, (t - last) / n)] += n
                    total += t - last
                last = t
    gaps.fold()
    assert gaps.buckets.counts == reference
    assert gaps.buckets.total == pytest.approx(total)
