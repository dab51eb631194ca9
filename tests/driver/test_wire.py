"""The HTTP target's own wire (harness/driver/http/wire.py), against a server on loopback that
answers in bytes framed by hand: every chunk stamped where it was read, keep-alive reuse and
every way a connection is not reused, the body framings HTTP/1.1 allows (chunked, a length, the
connection's end), a gzip body, credentials in the URL, and the failures that are the wire's."""

from __future__ import annotations

import asyncio
import base64
import gzip
import time

import orjson
import pytest

from harness.driver.http import wire
from harness.driver.recorder import collect
from harness.driver.target import RequestSpec
from harness.schema import new_record
from tests.driver.helpers import TEST_TIMEOUTS, target
from tests.waits import HANG_S

TOKENS = 3


def stream_body(tokens: int = TOKENS) -> bytes:
    events = [{"choices": [{"index": 0, "text": f"t{i}"}]} for i in range(tokens)]
    usage = {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": 4 + tokens}
    events.append({"choices": [], "usage": usage})
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


class RawServer:
    """Reads each request (head and Content-Length body) and answers with `answer(n)`'s parts,
    the n-th request of the server's life: bytes are written, a float is a pause, None closes
    the connection, "eof" waits for the client to close it. Counts connections; keeps each
    request's head."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.connections = 0
        self.heads: list[bytes] = []
        self.closed_by_client = 0
        self.written: list[float] = []  # when each bytes part was written (perf_counter)
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,  # a GET's
                )
                await reader.readexactly(length)
                self.heads.append(head)
                for part in self.answer(len(self.heads)):
                    if part is None:
                        writer.close()
                        return
                    if part == "eof":
                        await writer.drain()
                        if not await reader.read():
                            self.closed_by_client += 1
                        return
                    if isinstance(part, float):
                        await writer.drain()
                        await asyncio.sleep(part)
                    else:
                        self.written.append(time.perf_counter())
                        writer.write(part)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
        finally:
            writer.close()


@pytest.fixture
async def raw():
    servers: list[RawServer] = []

    async def make(answer) -> tuple[RawServer, str]:
        srv = RawServer(answer)
        servers.append(srv)
        return srv, await srv.start()

    yield make
    for srv in servers:
        await srv.stop()


def spec(i: int = 0, **kw) -> RequestSpec:
    fields = dict(
        request_id=f"s:{i}",
        session_id="s",
        sticky_key="s",
        endpoint=0,
        max_tokens=TOKENS,
        prompt_tokens=4,
        prompt=[1, 2, 3, 4],
    )
    return RequestSpec(**(fields | kw))


async def requests(url: str, n: int = 1, **kw) -> list[dict]:
    tgt = target(url, api="completions", **kw)
    await tgt.start(check=False)
    try:
        return [await collect(tgt, spec(i), new_record(), 0.0) for i in range(n)]
    finally:
        await tgt.close()


def ok(rec: dict) -> bool:
    return rec["status"] == "ok" and sum(rec["chunk_tokens"]) == TOKENS


async def test_every_chunk_time_is_a_read_the_connection_stamped(server, monkeypatch):
    stamps: list[float] = []

    def clock(_real=wire._perf):
        stamps.append(_real())
        return stamps[-1]

    monkeypatch.setattr(wire, "_perf", clock)
    (rec,) = await requests(server.url)
    assert rec["status"] == "ok" and len(rec["chunk_times"]) == TOKENS
    assert set(rec["chunk_times"]) <= set(stamps)


async def test_pieces_that_arrive_apart_are_stamped_apart(raw):
    body = stream_body()
    cut = body.index(b"data: ", 10)  # the first event alone, then a pause, then the rest
    srv, url = await raw(
        lambda n: [
            SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
            chunked(body[:cut])[:-5],  # without the last chunk's 0-length end
            0.15,
            chunked(body[cut:]),
        ]
    )
    (rec,) = await requests(url)
    assert ok(rec)
    first, *rest = rec["chunk_times"]  # perf_counter values: collect's t0 was 0
    # the first token was stamped before the rest was even written, the rest after
    assert first < srv.written[-1] <= min(rest)


async def test_a_keep_alive_connection_carries_every_request(raw):
    srv, url = await raw(
        lambda n: [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", chunked(stream_body())]
    )
    recs = await requests(url, 3)
    assert all(ok(r) for r in recs)
    assert srv.connections == 1 and len(srv.heads) == 3


@pytest.mark.parametrize(
    "framing",
    [
        "content-length",
        "until-close",  # no length, not chunked: the body ends with the connection
        "connection-close",  # chunked, but the server says it closes after
    ],
)
async def test_each_framing_ends_whole_and_a_closing_connection_is_not_reused(raw, framing):
    body = stream_body()
    answers = {
        "content-length": [SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body],
        "until-close": [SSE_HEAD + b"\r\n" + body, None],
        "connection-close": [
            SSE_HEAD + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            chunked(body),
            None,
        ],
    }
    srv, url = await raw(lambda n: answers[framing])
    recs = await requests(url, 2)
    assert all(ok(r) for r in recs), recs
    assert srv.connections == (1 if framing == "content-length" else 2)


async def test_a_gzip_body_is_read(raw):
    body = gzip.compress(stream_body())
    head = SSE_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)
    _, url = await raw(lambda n: [head + body])
    (rec,) = await requests(url)
    assert ok(rec)


async def test_a_body_in_an_unknown_coding_is_one_failed_record(raw):
    _, url = await raw(lambda n: [SSE_HEAD + b"Content-Encoding: br\r\n\r\n", b"xx", None])
    (rec,) = await requests(url)
    assert (rec["status"], rec["error"]["class"]) == ("error", "BadResponse")
    assert "'br'" in rec["error"]["message"]


async def test_an_idle_connection_the_server_closed_is_not_reused(raw):
    srv, url = await raw(
        lambda n: [
            SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
            chunked(stream_body()),
            0.0,
            None,
        ]
    )
    tgt = target(url, api="completions")
    await tgt.start(check=False)
    try:
        first = await collect(tgt, spec(0), new_record(), 0.0)
        await asyncio.sleep(0.1)  # the server's close reaches the idle connection
        second = await collect(tgt, spec(1), new_record(), 0.0)
    finally:
        await tgt.close()
    assert ok(first) and ok(second) and srv.connections == 2


async def test_a_connection_idle_past_the_keep_alive_time_is_not_reused(raw):
    srv, url = await raw(
        lambda n: [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", chunked(stream_body())]
    )
    tgt = target(url, api="completions", network={"keepalive_s": 0.05})
    await tgt.start(check=False)
    try:
        recs = [await collect(tgt, spec(0), new_record(), 0.0)]
        await asyncio.sleep(0.1)
        recs.append(await collect(tgt, spec(1), new_record(), 0.0))
    finally:
        await tgt.close()
    assert all(ok(r) for r in recs) and srv.connections == 2


async def test_credentials_in_the_url_go_as_basic_auth_and_never_in_the_head(raw):
    srv, url = await raw(
        lambda n: [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", chunked(stream_body())]
    )
    (rec,) = await requests(url.replace("http://", "http://us%40er:p%3Ass@"))
    assert ok(rec)
    head = srv.heads[0].decode()
    assert f"Authorization: Basic {base64.b64encode(b'us@er:p:ss').decode()}" in head
    assert "p%3Ass" not in head and "Host: 127.0.0.1:" in head


async def test_a_line_break_in_a_session_header_is_a_failed_record_not_a_new_header(raw):
    srv, url = await raw(
        lambda n: [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", chunked(stream_body())]
    )
    tgt = target(url, api="completions")
    await tgt.start(check=False)
    try:
        rec = await collect(tgt, spec(sticky_key="s\r\nX-Evil: 1"), new_record(), 0.0)
    finally:
        await tgt.close()
    assert (rec["status"], rec["error"]["class"]) == ("error", "BadHeader")
    assert srv.heads == []  # nothing was sent


async def test_an_invalid_response_is_one_failed_record(raw):
    _, url = await raw(lambda n: [b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", None])
    (rec,) = await requests(url)
    assert (rec["status"], rec["error"]["class"]) == ("error", "BadResponse")


async def test_an_error_status_keeps_its_message_and_retry_after(raw):
    body = orjson.dumps({"error": {"message": "slow down"}})
    head = b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
    head += b"Retry-After: 3\r\nContent-Length: %d\r\n\r\n" % len(body)
    srv, url = await raw(lambda n: [head + body])
    recs = await requests(url, 2)
    for rec in recs:
        assert (rec["status"], rec["error"]["class"]) == ("error", "HTTP429")
        assert rec["error"]["message"] == "HTTP 429 Too Many Requests: slow down"
        assert rec["error"]["retry_after_s"] == 3.0
    assert srv.connections == 1  # an error that came whole leaves the connection usable


async def test_a_cancelled_request_closes_its_connection(raw):
    srv, url = await raw(lambda n: [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", "eof"])
    tgt = target(url, api="completions")
    await tgt.start(check=False)
    try:
        task = asyncio.ensure_future(collect(tgt, spec(), new_record(), 0.0))
        while not srv.heads:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):  # the server, mid-answer, sees the client leave
            if srv.closed_by_client:
                break
            await asyncio.sleep(0.01)
    finally:
        await tgt.close()
    assert srv.closed_by_client == 1


async def test_the_request_goes_to_the_socket_in_the_turn_it_is_sent(server, monkeypatch):
    """No loop turn between the target's call and the write, on a new connection's second
    request as on the first (aiohttp on Python 3.11 wrote the body from a task a turn later)."""
    loop = asyncio.get_running_loop()
    turns = {"n": 0}

    def tick() -> None:
        turns["n"] += 1
        handles[0] = loop.call_soon(tick)

    handles = [loop.call_soon(tick)]
    lags: list[int] = []
    send = wire.Connection.send

    def noting(self, *args):
        lags.append(turns["n"] - at[0])
        return send(self, *args)

    monkeypatch.setattr(wire.Connection, "send", noting)
    tgt = target(server.url, api="completions", timeouts=TEST_TIMEOUTS)
    await tgt.start(check=False)
    try:
        for i in range(2):
            at = [turns["n"]]
            await tgt.stream(spec(i), _Nothing())
            if i == 0:
                continue  # the first waited for its connect
            assert lags[-1] == 0
    finally:
        handles[0].cancel()
        await tgt.close()


class _Nothing:
    def chunk(self, t, tokens, text) -> None:
        pass

    def event(self, ev) -> None:
        pass


async def test_an_interim_answer_is_skipped_for_the_real_one(raw):
    interim = b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"
    _, url = await raw(
        lambda n: [
            interim,
            SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
            chunked(stream_body()),
        ]
    )
    (rec,) = await requests(url)
    assert ok(rec)


async def test_the_client_names_itself_unless_a_header_of_the_scenario_does(raw):
    srv, url = await raw(
        lambda n: [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", chunked(stream_body())]
    )
    await requests(url)
    await requests(url, headers={"user-agent": "my-agent/2"})
    first, second = (h.decode().lower() for h in srv.heads)
    assert "\r\nuser-agent: agentic-harness/" in first
    assert second.count("user-agent:") == 1 and "user-agent: my-agent/2" in second


async def test_closing_the_target_ends_a_request_still_in_flight(raw):
    srv, url = await raw(lambda n: [SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n", "eof"])
    tgt = target(url, api="completions")
    await tgt.start(check=False)
    task = asyncio.ensure_future(collect(tgt, spec(), new_record(), 0.0))
    while not srv.heads:
        await asyncio.sleep(0.01)
    await tgt.close()
    rec = await asyncio.wait_for(task, HANG_S)
    assert rec["status"] == "error" and rec["error"]["class"] == "ConnectionClosed"
    assert "target closed" in rec["error"]["message"]
    for _ in range(200):
        if srv.closed_by_client:
            break
        await asyncio.sleep(0.01)
    assert srv.closed_by_client == 1
