"""The proxy forwards byte for byte: the official SDKs read the same answers through it as from
the upstream itself, the upstream gets the request as sent (key included), and the recording
keeps the usage and cache fields, the failures, and never the key."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from aiohttp import web

from harness.record.recorder import BackgroundRecorder
from tests.record.canned import Canned
from tests.record.conftest import API_KEY, recording
from tests.waits import HANG_S

pytestmark = pytest.mark.slow


class BackgroundApp:
    """An aiohttp application on 127.0.0.1:0, on its own loop and thread."""

    def __init__(self, app: web.Application) -> None:
        self.app, self.loop = app, asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        self.runner = web.AppRunner(self.app)
        self._call(self.runner.setup())
        self._call(web.TCPSite(self.runner, "127.0.0.1", 0).start())
        return f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def __exit__(self, *exc) -> None:
        self._call(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(HANG_S)
        self.loop.close()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(HANG_S)


@pytest.fixture(scope="module")
def upstream():
    canned = Canned()
    with BackgroundApp(canned.app()) as url:
        yield url, canned


@pytest.fixture(scope="module")
def proxied(upstream, tmp_path_factory):
    """The proxy in front of the canned upstream; the recording is written at module end."""
    folder = tmp_path_factory.mktemp("proxy") / "rec"
    rec = recording(upstream[0], folder, folder.parent / "salt")
    background = BackgroundRecorder(rec)
    url = background.__enter__()
    yield url, folder, background
    background.__exit__(None, None, None)


def _raw(url: str, body: dict | None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=HANG_S) as resp:
            return resp.status, _lower(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, _lower(exc.headers), exc.read()


def _lower(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}  # names' case is not HTTP's business


def _openai(base: str):
    import openai

    return openai.OpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)


def test_the_openai_sdk_reads_the_same_answers(upstream, proxied):
    ask = dict(model="m", messages=[{"role": "user", "content": "hi"}])
    answers = []
    for base in (upstream[0], proxied[0]):
        with _openai(base) as client:
            whole = client.chat.completions.create(**ask).model_dump()
            chunks = [c.model_dump() for c in client.chat.completions.create(**ask, stream=True)]
            answers.append((whole, chunks))
    assert answers[0] == answers[1]
    assert answers[0][0]["choices"][0]["message"]["content"] == "Hi there"  # gzip, read


def test_the_anthropic_sdk_reads_the_same_answers(upstream, proxied):
    import anthropic

    ask = dict(model="m", max_tokens=9, messages=[{"role": "user", "content": "hi"}])
    answers = []
    for base in (upstream[0], proxied[0]):
        with anthropic.Anthropic(base_url=base, api_key=API_KEY, max_retries=0) as client:
            whole = client.messages.create(**ask).model_dump()
            with client.messages.stream(**ask) as stream:
                events = [e.model_dump() for e in stream]
            answers.append((whole, events))
    assert answers[0] == answers[1]


def test_bytes_status_and_headers_pass_as_they_came(upstream, proxied):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    direct = _raw(f"{upstream[0]}/v1/chat/completions", body, {"Accept-Encoding": "gzip"})
    via = _raw(f"{proxied[0]}/v1/chat/completions", body, {"Accept-Encoding": "gzip"})
    assert via[0] == direct[0] == 200
    assert via[2] == direct[2] and via[2][:2] == b"\x1f\x8b"  # the gzip bytes themselves
    for name in ("content-encoding", "content-length", "x-upstream", "content-type"):
        assert via[1][name] == direct[1][name]
    streamed = {**body, "stream": True}
    assert (
        _raw(f"{proxied[0]}/v1/chat/completions", streamed)[2]
        == _raw(f"{upstream[0]}/v1/chat/completions", streamed)[2]
    )


def test_the_upstream_gets_the_request_as_sent(upstream, proxied):
    canned = upstream[1]
    body = b'{"model": "m",  "messages": [{"role": "user", "content": "exact  bytes"}]}'
    req = urllib.request.Request(
        f"{proxied[0]}/v1/chat/completions?x=1",
        body,
        {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {API_KEY}",
            "x-api-key": API_KEY,
            "X-Custom": "kept",
        },
    )
    urllib.request.urlopen(req, timeout=HANG_S).read()
    seen = canned.seen[-1]
    assert (seen.method, seen.path, seen.body) == ("POST", "/v1/chat/completions", body)
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.headers["x-api-key"] == API_KEY and seen.headers["x-custom"] == "kept"


def test_errors_and_other_paths_pass_through(upstream, proxied):
    status, headers, body = _raw(f"{proxied[0]}/v1/responses", {"model": "m", "input": "x"})
    assert status == 429 and headers["retry-after"] == "7"
    assert json.loads(body)["error"]["message"] == "slow down"
    status, _, body = _raw(f"{proxied[0]}/v1/models", None)
    assert status == 200 and json.loads(body)["data"][0]["id"] == "m"


def test_a_cut_stream_is_cut_for_the_client_too(proxied):
    with pytest.raises(http.client.IncompleteRead):  # the body ends before its end
        _raw(f"{proxied[0]}/v1/completions", {"model": "m", "prompt": "x", "stream": True})


def test_an_unreachable_upstream_is_a_502(tmp_path):
    rec = recording("http://127.0.0.1:9", tmp_path / "rec", tmp_path / "salt")
    with BackgroundRecorder(rec) as url:
        status, _, body = _raw(f"{url}/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 502 and "the upstream failed" in json.loads(body)["error"]["message"]
    done = [json.loads(x) for x in (tmp_path / "rec" / "requests.jsonl").read_text().splitlines()]
    assert [d["outcome"] for d in done if d["kind"] == "done"] == ["failed"]


def _done_lines(folder: Path) -> list[dict]:
    lines = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    return [x for x in lines if x["kind"] == "done"]


def test_the_recording_keeps_usage_cache_fields_and_failures(proxied):
    """Each outcome it checks is made here: under xdist the module's other tests may run in
    another worker, with a proxy and recording of their own."""
    url, folder, background = proxied
    assert _raw(f"{url}/v1/responses", {"model": "m", "input": "x"})[0] == 429
    with pytest.raises(http.client.IncompleteRead):
        _raw(f"{url}/v1/completions", {"model": "m", "prompt": "x", "stream": True})
    with _openai(url) as client:
        list(
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "u"}], stream=True
            )
        )
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key=API_KEY, max_retries=0)
    ask = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "u"}]}
    with client, client.messages.stream(**ask) as stream:
        stream.get_final_message()
    background.__exit__(None, None, None)  # written whole now (the fixture's exit is a no-op then)
    background.__exit__ = lambda *exc: None  # type: ignore[method-assign]
    done = _done_lines(folder)
    by_outcome = {d["outcome"] for d in done}
    assert {"ok", "http_error", "failed"} <= by_outcome
    chat = [d for d in done if d["tokens"].get("cached_tokens") == 32]
    assert chat and chat[-1]["calls"] == 1 and chat[-1]["tokens"]["prompt_tokens"] == 50
    messages = [d for d in done if d.get("diagnostics")]
    assert messages[-1]["tokens"] == {
        "prompt_tokens": 130,
        "output_tokens": 9,
        "cached_tokens": 100,
        "cache_creation_tokens": 20,
    }
    assert messages[-1]["diagnostics"]["cache_miss_reason"]["type"] == "tools_changed"
    for path in folder.rglob("*"):
        assert API_KEY.encode() not in path.read_bytes()


def _lingering_upstream() -> web.Application:
    """A chat stream whose end (the chunked terminator) comes a while after its [DONE]."""

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
        await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n")
        await asyncio.sleep(0.5)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def _send_until_done(url: str, messages: list[dict]) -> None:
    """A chat stream read up to its [DONE], as an SDK reads it; then the connection closes."""
    import socket
    from urllib.parse import urlsplit

    body = json.dumps({"model": "m", "messages": messages, "stream": True})
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=HANG_S) as s:
        s.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
            f"application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        got = b""
        while b"[DONE]" not in got:
            got += s.recv(65536)


def test_a_client_that_leaves_after_the_whole_stream_is_recorded_ok(tmp_path):
    # SDKs close the connection on [DONE]; if that beats the upstream's own end, the client
    # still had every byte: the request belongs in the trace, and it ended when its last byte
    # was passed on, so the agent's next turn, sent at once, continues its session
    first = [{"role": "user", "content": "u"}]
    then = first + [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]
    with BackgroundApp(_lingering_upstream()) as up:
        rec = recording(up, tmp_path / "rec", tmp_path / "salt")
        with BackgroundRecorder(rec) as url:
            _send_until_done(url, first)
            _send_until_done(url, then)
    assert [d["outcome"] for d in _done_lines(tmp_path / "rec")] == ["ok", "ok"]
    described = json.loads((tmp_path / "rec" / "recording.json").read_text())
    assert list(described["turns"].values()) == [[0, 1]]
