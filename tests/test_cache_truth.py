"""The reference engine over real HTTP (`harness serve`): its cache granularity is detected as its
block size, from its records and its /metrics, and its hits match the ideal at that granularity."""

import json
from pathlib import Path

import pytest

from harness.app.cli import main

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"


@pytest.mark.slow
def test_reference_engine_over_http_granularity_and_breakdown(tmp_path):
    out = tmp_path / "run"
    sets = [
        "workload.sessions=2",
        "load.concurrency=2",
        "load.max_requests=60",
        "target.engine.mode=http",
        "target.engine.options.block_size=32",
        "target.engine.options.runner=simulated",
        "target.engine.options.sim_time_scale=0.1",
    ]
    assert (
        main(
            [
                "run",
                str(QUICKSTART),
                "-o",
                str(out),
                "--quiet",
                *sum((["--set", s] for s in sets), []),
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    g = summary["cache"]["granularity"]
    assert (g["block_size"], g["source"], g["from_metrics"]) == (32, "metrics", 32)
    assert (
        g["from_records"] is not None and g["from_records"] % 32 == 0
    )  # every hit in whole blocks
    assert summary["cache"]["ideal"] == {
        "block_size": 32,
        "computed_from": "trace",
        "miss_attribution": "exact",
    }
    # ample KV on one engine: what it serves is what an infinite cache at its granularity would
    assert summary["cache_hit_rate"] == pytest.approx(summary["ideal_cache_hit_rate"], abs=0.01)
    miss = summary["cache"]["miss_tokens"]
    assert miss["evicted"] <= 0.005 * summary["cache"]["prompt_tokens"]
    assert miss["cold"] > 0 and miss["granularity"] > 0
    assert miss["unexplained"] <= 0.005 * summary["cache"]["prompt_tokens"]
