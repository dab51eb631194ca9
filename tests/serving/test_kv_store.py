"""The KV store replicas share (`harness kv-store`), and hits by tier on the server's wire.

Replicas are real engines whose remote tier talks HTTP to a real store on 127.0.0.1; the
per-tier counters are read from a real server's /metrics and usage."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import torch

from harness.app.servers import child_env
from harness.engine.engine import LLMEngine
from harness.errors import EngineError
from harness.prometheus import metric_total
from harness.serving.kv_store import BackgroundStore
from harness.serving.server import BackgroundServer
from tests.engine.conftest import drain, greedy, prompt, sim, tiny
from tests.waits import HANG_S

TIERS = ("device", "cpu", "disk", "remote")


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=HANG_S) as resp:
        return json.loads(resp.read())


def _run(e: LLMEngine, rid: str, tokens: list[int]):
    e.add_request(rid, tokens, greedy(2))
    return drain(e)[rid][1]


def test_two_replicas_share_a_prefix_through_the_store():
    with BackgroundStore() as url:
        a, b = (LLMEngine(sim(num_gpu_blocks=64, kv_store=url)) for _ in range(2))
        shared = prompt(0, 160)  # 10 full blocks
        first = _run(a, "a", shared + prompt(1, 20))
        assert first.cached_tokens == 0
        out = _run(b, "b", shared + prompt(2, 20))
        assert out.cached_tokens_remote == 160 and out.cached_tokens == 160
        assert out.cached_tokens_device == 0
        stats = b.stats().tiers["remote"]
        assert stats["hit_tokens"] == 160 and stats["blocks_out"] == 10
        assert stats["bytes_out"] == 10 * b.config.model.kv_bytes_per_page("float32", 16)
        # The fetched blocks took device pages on b: its next turn hits them on the device.
        again = _run(b, "b2", shared + prompt(2, 20) + prompt(3, 5))
        assert again.cached_tokens_device >= 160 and again.cached_tokens_remote == 0


@pytest.mark.slow
def test_kv_bytes_travel_between_torch_replicas():
    with BackgroundStore() as url:
        a, b = (LLMEngine(tiny(num_gpu_blocks=64, kv_store=url)) for _ in range(2))
        shared = prompt(0, 100)
        a.add_request("a", shared, greedy(4))
        want = drain(a)["a"][0]
        b.add_request("b", shared, greedy(4))
        got = drain(b)["b"]
        assert got[1].cached_tokens_remote == 96
        assert got[0] == want  # the fetched KV is the KV the other replica computed
        k = b.runner.k_cache
        assert torch.equal(k[:, :6], a.runner.k_cache[:, :6])  # both filled pages 0..5 alike


def test_an_unreachable_store_is_one_line():
    with pytest.raises(EngineError, match="kv_store.*cannot reach"):
        LLMEngine(sim(kv_store="http://127.0.0.1:9"))


@pytest.mark.slow
def test_the_store_process_serves_and_counts():
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "kv-store", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("kv store on http://127.0.0.1:")
        url = line.split()[-1]
        a, b = (LLMEngine(sim(kv_store=url)) for _ in range(2))
        shared = prompt(5, 64)
        _run(a, "a", shared + [9])
        assert _run(b, "b", shared + [9]).cached_tokens_remote == 64
        text = urllib.request.urlopen(f"{url}/metrics", timeout=HANG_S).read().decode()
        assert metric_total(text, "harness_kv_store:hit_blocks_total") == 4
        assert metric_total(text, "harness_kv_store:blocks") >= 4
    finally:
        proc.terminate()
        proc.wait(HANG_S)


def test_metrics_and_usage_split_hits_by_tier(tmp_path):
    config = sim(
        num_gpu_blocks=12,
        cpu_offload_blocks=2,
        disk_offload_blocks=64,
        disk_offload_dir=str(tmp_path),
        sim_time_scale=0.0,
    )
    with BackgroundServer(config) as server:
        details = []
        a = prompt(0, 100)
        for tokens in [a, *(prompt(50 + j, 150) for j in range(3)), a + [7]]:
            body = {
                "model": config.served_model_name,
                "prompt": tokens,
                "max_tokens": 2,
                "return_cached_tokens_details": True,
            }
            r = _post(f"{server.url}/v1/completions", body)
            details.append((r["usage"]["prompt_tokens_details"], r["sglext"]))
        usage, sglext = details[-1]
        assert usage["cached_tokens_disk"] == 96
        assert sum(usage[f"cached_tokens_{t}"] for t in TIERS) == usage["cached_tokens"]
        assert sglext["cached_tokens_details"] == {
            "device": usage["cached_tokens_device"],
            "host": usage["cached_tokens_cpu"],
            "storage": 96,
            "storage_backend": "file",
        }
        text = urllib.request.urlopen(f"{server.url}/metrics", timeout=HANG_S).read().decode()
    by_source = {
        s: metric_total(text, "vllm:prompt_tokens_cached_by_source_total", source=s)
        for s in ("device", "host", "disk", "external_unspecified")
    }
    assert sum(by_source.values()) == metric_total(text, "vllm:prefix_cache_hits_total")
    assert by_source["disk"] == sum(u["cached_tokens_disk"] for u, _ in details) == 96
    reported = {
        t: metric_total(text, "harness:cached_tokens_reported_by_tier_total", tier=t) for t in TIERS
    }
    assert sum(reported.values()) == metric_total(text, "harness:cached_tokens_reported_total")
    name = "harness:kv_tier_blocks_moved_total"
    assert metric_total(text, name, tier="disk", direction="out") == 6
    assert metric_total(
        text, "harness:kv_tier_bytes_moved_total", tier="disk", direction="out"
    ) == (6 * config.model.kv_bytes_per_page("float32", 16))


@pytest.mark.slow
def test_a_run_with_kv_store_local_starts_one_store_for_its_served_replicas(tmp_path):
    from harness.app.cli import main

    out = tmp_path / "run"
    sets = [
        "workload.sessions=4",
        "load.concurrency=4",
        "load.max_requests=40",
        "target.engine.mode=http",
        "target.engine.replicas=2",
        "target.routing=round_robin",
        "target.engine.options.runner=simulated",
        "target.engine.options.sim_time_scale=0",
        "target.engine.options.kv_store=local",
    ]
    quickstart = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
    argv = ["run", str(quickstart), "-o", str(out), "--quiet"]
    assert main(argv + sum((["--set", s] for s in sets), [])) == 0
    summary = json.loads((out / "summary.json").read_text())
    tiers = summary["cache"]["tiers"]
    assert tiers["tokens"]["remote"] > 0  # round robin: turns found their prefix in the store
    assert tiers["server"]["tokens"] == tiers["tokens"]  # /metrics agrees with the records
    assert "kv store on http://127.0.0.1:" in (out / "servers" / "kv-store.log").read_text()
