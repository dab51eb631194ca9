"""Stale keep-alive connections with real servers: uvicorn (what vLLM and SGLang run) with a
1 s keep-alive, and nginx with a 1 s keepalive_timeout in front of it, under think times
around 1 s, so that connections are reused just as the server closes them. Every request must
succeed, the races sent once more on a fresh connection (`wire.resent`). The 800-request figures
are benchmarks/bench_keepalive.py's (docs/measurements/network.md)."""

from __future__ import annotations

import pytest

from tests.driver.real_programs import Nginx, Uvicorn, think_loop

pytestmark = pytest.mark.slow  # real servers, ~1 s think times


async def test_uvicorn_1s_keepalive_loses_no_request(tmp_path):
    server = Uvicorn(tmp_path, keepalive_s=1)
    with server.start():
        got = await think_loop(server.url, workers=40, turns=5, think_s=1.0)
    assert got["requests"] == 200 and got["failed"] == 0, got
    assert got["received"] == 200


async def test_nginx_1s_keepalive_loses_no_request(tmp_path):
    upstream = Uvicorn(tmp_path, keepalive_s=5)
    nginx = Nginx(tmp_path, upstream.url, buffering=False, keepalive_s=1.0)
    with upstream.start(), nginx.start():
        got = await think_loop(nginx.url, workers=40, turns=5, think_s=1.0)
    assert got["requests"] == 200 and got["failed"] == 0, got
