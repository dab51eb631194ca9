"""The server's cache granularity: detected from its cached_tokens and its /metrics, and used."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from harness.analysis.ideal.granularity import MIN_SAMPLES, decide, from_metrics, from_records
from harness.analysis.summary import analyze_run
from harness.prometheus import cache_block_size
from harness.trace.generate import generate
from harness.trace.model import Trace
from harness.trace.profile import load_profile
from tests.driver.helpers import replay
from tests.driver.sse_server import ServerConfig, SSETestServer
from tests.trace.tiny import CPU_PROFILE


def no_think(tr: Trace) -> Trace:
    sessions = tuple(
        dataclasses.replace(s, turns=tuple(dataclasses.replace(t, think_s=0.0) for t in s.turns))
        for s in tr.sessions
    )
    return Trace(tr.header, sessions)


@pytest.mark.parametrize("block", [16, 64, 128])
@pytest.mark.slow
async def test_a_server_that_hits_in_blocks_of_n_is_detected_and_matches_its_ideal(tmp_path, block):
    # The test server keeps every block it saw (nothing is evicted) and reports hits in whole
    # `block`s; the driver's configured block stays 16 (the manifest says 16).
    srv = SSETestServer(ServerConfig(keep_body=False, block_size=block))
    await srv.start()
    try:
        tr = no_think(generate(load_profile(CPU_PROFILE), seed=5, sessions=3))
        await replay(tr, srv.url, tmp_path, concurrency=1, api="completions", salt=f"g{block}")
    finally:
        await srv.stop()
    summary = analyze_run(tmp_path)
    g = summary["cache"]["granularity"]
    assert (g["block_size"], g["source"], g["from_records"], g["from_metrics"]) == (
        block,
        "records",
        block,
        None,
    )
    assert g["nonzero_samples"] >= MIN_SAMPLES
    assert summary["cache_hit_rate"] > 0.5
    assert summary["cache_hit_rate"] / summary["ideal_cache_hit_rate"] == pytest.approx(1.0)
    miss = summary["cache"]["miss_tokens"]
    assert miss["evicted"] == miss["in_flight"] == miss["unexplained"] == 0
    assert miss["granularity"] > 0
    assert summary["cache"]["server_rules"]["granularity"]["status"] == "detected"
    if block > 16:  # counted in 16-token blocks the server seems to miss what its blocks cannot
        at16 = analyze_run(tmp_path, block_size=16)
        assert at16["cache_hit_rate"] < at16["ideal_cache_hit_rate"]
        m16 = at16["cache"]["miss_tokens"]  # ... but the records show its coarser block
        assert (
            m16["evicted"] == m16["unexplained"] == 0 and m16["granularity"] >= miss["granularity"]
        )


def test_detection_from_records():
    rng = np.random.default_rng(1)
    for block in (16, 64, 128):
        values = rng.integers(1, 40, size=MIN_SAMPLES) * block
        values[::2] = (
            values[::2] // (2 * block) * (2 * block) + block
        )  # odd multiples: not 2x block
        cached = np.r_[values, 0, np.nan].astype(float)
        assert from_records(cached) == (block, MIN_SAMPLES)
    assert from_records(np.array([48.0] * MIN_SAMPLES), extra=(48,)) == (
        48,
        MIN_SAMPLES,
    )  # the trace's block
    assert from_records(np.array([128.0] * (MIN_SAMPLES - 1))) == (None, MIN_SAMPLES - 1)  # too few
    assert from_records(np.full(MIN_SAMPLES * 2, np.nan)) == (
        None,
        0,
    )  # a server that reports nothing
    assert from_records(np.array([17.0, 5.0] * MIN_SAMPLES)) == (
        1,
        2 * MIN_SAMPLES,
    )  # token-granular


def test_the_choice_and_its_reason():
    many16 = np.array([16.0, 48.0] * MIN_SAMPLES)
    many128 = np.array([128.0, 384.0] * MIN_SAMPLES)
    vllm = {
        "block_size": 16,
        "server_metrics": {
            "before": [{"cache_block_size": 128}],
            "after": [{"cache_block_size": 128}],
        },
    }
    g = decide(many128, vllm, None, None)
    assert (g.block_size, g.source, g.from_records, g.from_metrics) == (128, "metrics", 128, 128)
    g = decide(np.array([128.0]), vllm, None, None)  # too few to check: /metrics alone
    assert (g.block_size, g.source) == (128, "metrics") and "too few" in g.reason
    g = decide(many16, vllm, None, None)  # the records contradict /metrics: they win
    assert (g.block_size, g.source) == (16, "records") and "/metrics says 128" in g.reason
    g = decide(np.array([np.nan] * 40), {"block_size": 32}, 16, None)  # nothing reported
    assert (g.block_size, g.source, g.from_records) == (32, "manifest", None)
    assert (
        decide(np.array([]), {}, 64, None).source,
        decide(np.array([]), {}, None, None).block_size,
    ) == ("trace", 16)
    assert decide(many128, vllm, None, 8).as_dict() | {"reason": ""} == {
        "block_size": 8,
        "source": "argument",
        "reason": "",
        "from_records": 128,
        "nonzero_samples": 32,
        "from_metrics": 128,
        "min_samples": MIN_SAMPLES,
    }


def test_block_size_from_metrics_text_and_manifest():
    text = (
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True"} 1.0\n'
        'vllm:prefix_cache_hits_total{model_name="m"} 5.0\n'
    )
    assert cache_block_size(text) == 128
    assert cache_block_size('vllm:prefix_cache_hits_total{model_name="m"} 5.0\n') is None
    assert (
        from_metrics(
            {"before": [None, {"cache_block_size": 64}], "after": [{"cache_block_size": 64}]}
        )
        == 64
    )
    assert (
        from_metrics({"before": [{"cache_block_size": 16}], "after": [{"cache_block_size": 64}]})
        is None
    )
    assert from_metrics(None) is None


def test_summary_says_which_block_was_used_and_why(tmp_path):
    from tests.analysis.test_ideal import tiny_run

    folder = tiny_run(tmp_path / "r")
    manifest = json.loads((folder / "manifest.json").read_text())
    scraped = {"prefix_cache_queries": 0, "prefix_cache_hits": 0, "cache_block_size": 8}
    manifest["server_metrics"] = {"before": [scraped], "after": [scraped]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    summary = analyze_run(folder)
    g = summary["cache"]["granularity"]
    assert (g["block_size"], g["source"], g["from_metrics"], g["nonzero_samples"]) == (
        8,
        "metrics",
        8,
        0,
    )
    assert summary["cache"]["ideal"]["block_size"] == 8
    assert summary["ideal_cache_hit_rate"] == pytest.approx(72 / 134)  # b:0 32, a:0 0, a:1 40
