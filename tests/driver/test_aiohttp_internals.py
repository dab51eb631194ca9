"""The timed wire's aiohttp internals: the installed aiohttp has them, and a moved one fails the
start loudly (naming the version and the piece) instead of stamping every arrival "now"."""

import asyncio

import aiohttp
import pytest

from harness.driver.http import HTTPTarget, HTTPTargetConfig, wire
from harness.driver.http.aiohttp_internals import ResponseHandler, check, use_protocol
from harness.driver.recorder import collect
from harness.driver.target import RequestSpec
from harness.errors import DependencyError
from harness.schema import new_record
from tests.driver.helpers import TEST_TIMEOUTS


async def test_the_installed_aiohttp_has_every_piece():
    connector = aiohttp.TCPConnector()
    try:
        check(asyncio.get_running_loop(), connector)
        use_protocol(connector, wire.StampingProtocol)
        assert connector._factory().__class__ is wire.StampingProtocol
    finally:
        await connector.close()


def _target(url: str) -> HTTPTarget:
    """No preflight probe: a piece gone would fail it at start, where these tests want the
    request's own record."""
    config = HTTPTargetConfig(
        endpoints=(url,), model="m", api="completions", timeouts=TEST_TIMEOUTS, preflight=False
    )
    return HTTPTarget(config)


def _expect_missing(match: str):
    return pytest.raises(DependencyError, match=rf"aiohttp {aiohttp.__version__}: {match}")


async def test_a_connector_without_its_protocol_factory_fails_the_start(server, monkeypatch):
    init = aiohttp.TCPConnector.__init__

    def without_factory(self, *args, **kwargs):
        init(self, *args, **kwargs)
        del self._factory

    monkeypatch.setattr(aiohttp.TCPConnector, "__init__", without_factory)
    target = _target(server.url)
    with _expect_missing(r"TCPConnector\._factory"):
        await target.start()


async def test_a_factory_of_another_shape_fails_the_start(server, monkeypatch):
    init = aiohttp.TCPConnector.__init__

    def other_factory(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._factory = lambda: ResponseHandler(asyncio.get_running_loop())

    monkeypatch.setattr(aiohttp.TCPConnector, "__init__", other_factory)
    with _expect_missing(r"TCPConnector\._factory"):
        await _target(server.url).start()


async def test_a_protocol_without_its_current_body_fails_the_start(server, monkeypatch):
    init = ResponseHandler.__init__

    def without_payload(self, *args, **kwargs):
        init(self, *args, **kwargs)
        del self._payload

    monkeypatch.setattr(ResponseHandler, "__init__", without_payload)
    with _expect_missing(r"ResponseHandler\._payload"):
        await _target(server.url).start()


def _spec() -> RequestSpec:
    return RequestSpec(
        request_id="s:0",
        session_id="s",
        sticky_key="s",
        endpoint=0,
        max_tokens=8,
        prompt_tokens=4,
        prompt=[1, 2, 3, 4],
    )


async def test_every_chunk_time_is_an_arrival_the_protocol_stamped(server, monkeypatch):
    stamps = []

    def clock(_real=wire._perf):
        stamps.append(_real())
        return stamps[-1]

    monkeypatch.setattr(wire, "_perf", clock)
    target = _target(server.url)
    await target.start()
    try:
        rec = await collect(target, _spec(), new_record(), 0.0)
    finally:
        await target.close()
    assert rec["status"] == "ok" and len(rec["chunk_times"]) == 8
    assert set(rec["chunk_times"]) <= set(stamps)


async def test_a_body_the_protocol_did_not_see_fails_its_request_loudly(server, monkeypatch):
    # aiohttp's `_payload` no longer being the body read: the record says so, no "now" stamps
    monkeypatch.setattr(wire, "response_body", lambda handler: None)
    target = _target(server.url)
    await target.start()
    try:
        rec = await collect(target, _spec(), new_record(), 0.0)
    finally:
        await target.close()
    assert rec["status"] == "error" and rec["chunk_times"] == []
    assert rec["error"]["class"] == "DependencyError"
    assert "ResponseHandler._payload" in rec["error"]["message"]


AIOHTTP_PRIVATES = {"_factory", "_payload", "_value", "_size", "_protocol", "_connection"}


def test_no_other_module_touches_aiohttp_privates():
    # the adapter is the one place to look when aiohttp moves: any private attribute used by a
    # module that imports aiohttp (outside the adapter) is one the start-up check does not cover
    import ast
    from pathlib import Path

    root = Path(wire.__file__).parents[1]  # the driver: the serving side is not timed
    for path in root.rglob("*.py"):
        if path.name == "aiohttp_internals.py" or "aiohttp" not in path.read_text():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            where = f"{path.name}:{node.lineno}: .{node.attr}"
            assert node.attr not in AIOHTTP_PRIVATES, where  # on a subclass's `self` too
            if not node.attr.startswith("__"):
                assert isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"), where
