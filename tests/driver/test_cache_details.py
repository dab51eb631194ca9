"""Cached tokens by tier reach the record: SGLang's `sglext.cached_tokens_details` (a server that
streams as SGLang's OpenAI server does: an `sglext` chunk with no choices before the usage chunk,
only when the request asks with `return_cached_tokens_details`) and the reference engine's usage."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.recorder import collect
from harness.driver.target import RequestSpec
from harness.engine.config import EngineConfig
from harness.schema import new_record
from harness.serving.server import BackgroundServer
from tests.driver.helpers import TEST_TIMEOUTS

DETAILS_KEY = web.AppKey("details", dict)
DETAILS = {"device": 64, "host": 32, "storage": 16, "storage_backend": "mooncake"}


def _event(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _sglang_like(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i in range(body["max_tokens"]):
        choice = {"index": 0, "text": f" t{i}", "finish_reason": None}
        await resp.write(_event({"id": "c", "object": "text_completion", "choices": [choice]}))
    if body.get("return_cached_tokens_details"):
        sglext = {"cached_tokens_details": request.app[DETAILS_KEY]}
        await resp.write(_event({"id": "c", "choices": [], "sglext": sglext}))
    usage = {"prompt_tokens": 128, "completion_tokens": body["max_tokens"], "total_tokens": 130}
    usage["prompt_tokens_details"] = {"cached_tokens": 112}
    await resp.write(_event({"id": "c", "choices": [], "usage": usage}))
    await resp.write(b"data: [DONE]\n\n")
    return resp


@pytest.fixture
async def sglang_url():
    app = web.Application()
    app[DETAILS_KEY] = dict(DETAILS)
    app.router.add_post("/v1/completions", _sglang_like)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", app
    await runner.cleanup()


async def _record(
    url: str, *, cache_details: bool, prompt: list[int] | None = None, model: str = "m"
) -> dict:
    config = HTTPTargetConfig(
        endpoints=(url,),
        model=model,
        api="completions",
        timeouts=TEST_TIMEOUTS,
        cache_details=cache_details,
    )
    target = HTTPTarget(config)
    await target.start()
    try:
        spec = RequestSpec(
            request_id="s:0",
            session_id="s",
            sticky_key="s",
            endpoint=0,
            max_tokens=2,
            prompt_tokens=4,
            prompt=prompt or [1, 2, 3, 4],
        )
        return dict(await collect(target, spec, new_record(), 0.0))
    finally:
        await target.close()


async def test_sglang_cached_tokens_details_are_recorded_by_tier(sglang_url):
    url, _ = sglang_url
    rec = await _record(url, cache_details=True)
    assert rec["status"] == "ok" and rec["cached_tokens"] == 112
    tiers = {t: rec[f"cached_tokens_{t}"] for t in ("device", "cpu", "disk", "remote")}
    assert tiers == {"device": 64, "cpu": 32, "disk": 0, "remote": 16}  # mooncake: a remote store


async def test_sglang_file_storage_is_the_disk_tier_and_no_ask_no_split(sglang_url):
    url, app = sglang_url
    app[DETAILS_KEY]["storage_backend"] = "file"
    rec = await _record(url, cache_details=True)
    assert (rec["cached_tokens_disk"], rec["cached_tokens_remote"]) == (16, 0)
    plain = await _record(url, cache_details=False)
    assert plain["cached_tokens"] == 112 and plain["cached_tokens_device"] is None


async def test_the_reference_servers_usage_splits_by_tier():
    config = EngineConfig(runner="simulated", sim_time_scale=0.0, num_gpu_blocks=64, device="cpu")
    p = list(range(1000, 1100))
    with BackgroundServer(config) as server:
        name = config.served_model_name
        await _record(server.url, cache_details=False, prompt=p, model=name)
        rec = await _record(server.url, cache_details=False, prompt=p, model=name)
    assert rec["cached_tokens"] == 96 and rec["cached_tokens_device"] == 96
    assert rec["cached_tokens_cpu"] == rec["cached_tokens_disk"] == rec["cached_tokens_remote"] == 0
