"""`harness probe cache` against the reference engine over real HTTP: it finds the configured KV
pool, the block size and the whole-block rules; through a proxy that hides /metrics it fills until
a canary misses; through one that also hides cached_tokens it falls back to TTFT."""

from __future__ import annotations

import json

import aiohttp
import orjson
import pytest
from aiohttp import web

from harness.app.cli import main
from harness.app.commands.probe import probe_cache
from harness.engine.config import EngineConfig
from harness.probe.cache_probe import ProbeSettings
from harness.serving.server import BackgroundServer

BLOCKS, BLOCK = 96, 16  # a 1,536-token pool
FAST = ProbeSettings(idle_waits_s=(0.0, 0.3), seed=7)


def engine(**kw) -> EngineConfig:
    return EngineConfig(
        runner="simulated",
        sim_time_scale=0.0,
        num_gpu_blocks=BLOCKS,
        block_size=BLOCK,
        device="cpu",
        **kw,
    )


@pytest.mark.slow
def test_finds_the_configured_pool_block_size_and_rules(tmp_path):
    config = engine()
    with BackgroundServer(config) as server:
        code, doc = probe_cache(f"{server.url}/v1", config.served_model_name, tmp_path, FAST)
    assert code == 0 and doc["ending"] == "complete"
    assert doc["advertised_pool_tokens"] == BLOCKS * BLOCK
    assert doc["retained_tokens"] == pytest.approx(BLOCKS * BLOCK, rel=0.10)
    assert not doc["capacity"]["lower_bound"]  # the fill went past the pool: a miss was found
    assert doc["block_size"] == BLOCK and doc["block"]["hits_whole_blocks"]
    assert doc["block"]["hits_every_shared_block"]
    # the engine keeps a whole-block prompt's last block, and serves at most prompt - 1 tokens
    assert doc["block"]["last_block_kept"] and not doc["block"]["whole_prompt_served"]
    assert doc["idle_retention_s"] == 0.3 and doc["idle"]["lower_bound"]  # no TTL
    assert doc["detection"] == "cached_tokens" and doc["reliable"]
    on_disk = json.loads((tmp_path / "probe.json").read_text())
    assert on_disk["retained_tokens"] == doc["retained_tokens"]
    assert (tmp_path / "probe.png").stat().st_size > 0
    assert "retained context" in (tmp_path / "probe.txt").read_text()


@pytest.mark.slow
def test_a_smaller_pool_reads_smaller(tmp_path):
    """The probe measures, it does not echo the advertised figure: told the pool is twice what
    it is, it still finds the real one."""
    config = engine()
    settings = ProbeSettings(pool_tokens=2 * BLOCKS * BLOCK, idle_waits_s=(0.0,), seed=3)
    with BackgroundServer(config) as server:
        code, doc = probe_cache(f"{server.url}/v1", config.served_model_name, tmp_path, settings)
    assert code == 0
    assert doc["retained_tokens"] == pytest.approx(BLOCKS * BLOCK, rel=0.10)


async def _proxy_app(upstream: str, strip_cached: bool) -> web.AppRunner:
    """Forwards /v1/models and /v1/completions; has no /metrics; optionally drops cached_tokens."""
    session = aiohttp.ClientSession()

    async def models(request: web.Request) -> web.Response:
        async with session.get(f"{upstream}/v1/models") as r:
            return web.json_response(await r.json())

    async def completions(request: web.Request) -> web.StreamResponse:
        async with session.post(f"{upstream}/v1/completions", json=await request.json()) as r:
            if r.status != 200:
                return web.Response(status=r.status, body=await r.read())
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            async for line in r.content:
                if strip_cached and line.startswith(b"data: {"):
                    event = orjson.loads(line[6:])
                    (event.get("usage") or {}).pop("prompt_tokens_details", None)
                    line = b"data: " + orjson.dumps(event) + b"\n"
                await resp.write(line)
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.on_cleanup.append(lambda _: session.close())
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.mark.parametrize("strip_cached", [False, True])
@pytest.mark.slow
def test_without_metrics_fills_until_a_canary_misses(tmp_path, strip_cached):
    config = engine()
    background = BackgroundServer(config)
    with background as server:
        runner = background.call(_proxy_app(server.url, strip_cached))
        try:
            url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
            settings = ProbeSettings(context_tokens=200, idle_waits_s=(0.0,), seed=5)
            code, doc = probe_cache(url, config.served_model_name, tmp_path, settings)
        finally:
            background.call(runner.cleanup())
    assert code == 0 and doc["advertised_pool_tokens"] is None
    assert doc["capacity"]["filled_tokens"] > BLOCKS * BLOCK
    if strip_cached:  # no counts: TTFT decides, and says whether it can
        assert doc["detection"] == "ttft" and doc["block_size"] is None
        assert isinstance(doc["reliable"], bool)
    else:
        assert doc["retained_tokens"] == pytest.approx(BLOCKS * BLOCK, rel=0.10)


@pytest.mark.slow
def test_an_unreachable_endpoint_is_bad_input(tmp_path, capsys):
    code = main(
        [
            "probe",
            "cache",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "-o",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "cannot reach" in capsys.readouterr().err
    assert json.loads((tmp_path / "probe.json").read_text())["ending"].startswith("failed")


def test_bad_flags_name_the_flag(tmp_path, capsys):
    argv = ["probe", "cache", "--endpoint", "http://x/v1", "--model", "m", "-o", str(tmp_path)]
    assert main([*argv, "--idle-waits", "soon"]) == 2
    assert "--idle-waits" in capsys.readouterr().err
    assert main([*argv, "--fill-factor", "0.5"]) == 2
    assert "--fill-factor" in capsys.readouterr().err


@pytest.mark.slow
def test_large_blocks_fill_the_pool_in_whole_blocks_at_an_endpoint_without_v1(tmp_path):
    """128-token blocks and a pool of 24 (pool/16 = 192 tokens, one block and a half): each
    context is sized in whole blocks, so the fill covers the pool it measures; the endpoint is
    given without /v1, as `harness replay` takes it."""
    config = EngineConfig(
        runner="simulated", sim_time_scale=0.0, num_gpu_blocks=24, block_size=128, device="cpu"
    )
    with BackgroundServer(config) as server:
        code, doc = probe_cache(server.url, config.served_model_name, tmp_path, FAST)
    cap = doc["capacity"]
    assert code == 0 and doc["block_size"] == 128
    assert doc["retained_tokens"] == pytest.approx(24 * 128, rel=0.15)
    assert cap["cacheable_tokens"] % 128 == 0 and cap["context_tokens"] % 128 == 64
    assert cap["fill_of_pool"] >= 1.0 and cap["not_block_sized"] is None
    assert "fill short" not in (tmp_path / "probe.txt").read_text()
