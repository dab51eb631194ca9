"""A zero-delay OpenAI-style streaming server that stamps its own times where bytes move.

    python benchmarks/stamp_server.py [--port 0] [--max-output 32] [--cpu N]

Prints `PORT <n>` once it listens on 127.0.0.1. It answers `POST /v1/completions` and
`POST /v1/chat/completions` with an SSE stream (chunked): one event per token, the usage
object, `[DONE]`; `GET /log` (`?clear=1` empties it) returns its stamps as a JSON list; any
other request gets an empty 404.

It is written on `asyncio.Protocol`, not on a web framework, so its stamps are taken where the
bytes move and no handler task or body parse stands between them (the aiohttp server of
tests/driver/sse_server.py stamps in its handler, after the event loop got round to it, and
parses every ~1 MB body). Times are `time.perf_counter()` (CLOCK_MONOTONIC on Linux, the
client's clock too), per request:

- `t_recv`: the request's first bytes reached `data_received`;
- `t_body`: its last body byte did; the reply starts there, so the server's TTFT is
  `t_first_token - t_recv` with the upload in it, as a client sees it;
- `t_first_token`: just before the first token's event went to the socket (the default
  asyncio loop writes at once when its buffer is empty; uvloop may hold a write to the end
  of the loop's turn, so this server does not use it).

The body is never parsed: its first and last 512 bytes are searched for `"max_tokens":N`,
and the reply has min(N, --max-output) tokens. `X-Harness-Request-ID` names the request.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import time

import orjson

_perf = time.perf_counter
MAX_TOKENS = re.compile(rb'"max_tokens":\s*(\d+)')
EDGE = 512


def _event(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _token(chat: bool) -> bytes:
    if chat:
        return _event(
            {
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": " tok"}}],
            }
        )
    return _event({"object": "text_completion", "choices": [{"index": 0, "text": " tok"}]})


TOKEN = {True: _token(True), False: _token(False)}
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


class StampServer(asyncio.Protocol):
    """One connection: requests one after another (HTTP/1.1 keep-alive, no pipelining)."""

    log: list[dict] = []
    max_output = 32

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.head = bytearray()
        self.need = 0  # body bytes still to come
        self.entry: dict | None = None
        self.first = self.last = b""  # the body's first and last EDGE bytes

    def data_received(self, data: bytes) -> None:
        now = _perf()
        view = memoryview(data)
        while view:
            if self.need:
                take = min(self.need, len(view))
                part = view[:take]
                if len(self.first) < EDGE:
                    self.first += bytes(part[: EDGE - len(self.first)])
                self.last = (self.last + bytes(part[-EDGE:]))[-EDGE:]
                self.need -= take
                view = view[take:]
                if not self.need:
                    self._reply(now)
                continue
            if self.entry is None:
                self.entry = {"t_recv": now}
            self.head += view
            view = memoryview(b"")
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, rest = bytes(self.head[:end]), bytes(self.head[end + 4 :])
            self.head = bytearray()
            self._start(head)
            view = memoryview(rest)
            if not self.need:
                self._reply(now)

    def _start(self, head: bytes) -> None:
        line, *fields = head.decode("latin-1").split("\r\n")
        method, path, _ = line.split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
        self.need = int(headers.get("content-length", 0))
        self.first = self.last = b""
        self.entry.update(method=method, path=path, request_id=headers.get("x-harness-request-id"))

    def _reply(self, now: float) -> None:
        entry, self.entry = self.entry, None
        entry["t_body"] = now
        method, path = entry.pop("method"), entry.pop("path")
        if method == "GET" and path.startswith("/log"):
            body = orjson.dumps(StampServer.log)
            if "clear=1" in path:
                StampServer.log = []
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            return
        if method != "POST" or not path.endswith("completions"):
            self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        found = MAX_TOKENS.search(self.first + b" " + self.last)
        n = max(1, min(int(found.group(1)) if found else self.max_output, self.max_output))
        chat = "chat" in path
        StampServer.log.append(entry)
        entry["t_first_token"] = _perf()
        self.transport.write(HEAD + _chunk(TOKEN[chat]))
        asyncio.get_running_loop().call_soon(self._rest, chat, n - 1)

    def _rest(self, chat: bool, n: int) -> None:
        usage = {"prompt_tokens": 0, "completion_tokens": n + 1, "total_tokens": n + 1}
        tail = TOKEN[chat] * n + _event({"choices": [], "usage": usage}) + b"data: [DONE]\n\n"
        if not self.transport.is_closing():
            self.transport.write(_chunk(tail) + b"0\r\n\r\n")


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(StampServer, "127.0.0.1", port, backlog=4096)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--max-output", type=int, default=32, help="most tokens in one reply")
    ap.add_argument("--cpu", type=int, help="pin the server to this CPU")
    a = ap.parse_args()
    if a.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {a.cpu % (os.cpu_count() or 1)})
    StampServer.max_output = a.max_output
    asyncio.run(serve(a.port))
