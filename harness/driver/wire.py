"""The bytes on the wire, timed: when a request's body went to the socket, and when each piece of
a response body arrived. The OpenAI HTTP target (openai_http.py) builds on aiohttp with these.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from aiohttp.payload import Payload

from harness.driver.aiohttp_internals import ResponseHandler, response_body

_perf = time.perf_counter


class StampingProtocol(ResponseHandler):
    """aiohttp's protocol, noting when each piece of a response body arrived.

    `data_received` runs in the event loop's I/O phase, as soon as the loop polls the socket and
    before the tasks it wakes. Each call that grows the current response's body appends a mark
    `(body bytes so far, time)`; the reading task, however late it runs, splits what it reads at
    the marks, so every event is stamped with its own arrival. (Stamping a whole read with its
    last arrival would give a first token that came with the headers the time of the tail that
    came a loop turn later.) `rx_last` is the latest arrival of any bytes.
    """

    rx_last = 0.0
    rx_body: object = None  # the StreamReader the marks are of
    rx_marks: list[tuple[int, float]] = []

    def data_received(self, data: bytes, _base=ResponseHandler.data_received) -> None:
        if not data:  # aiohttp's own call when a read frees its buffer: nothing arrived
            return _base(self, data)
        t = self.rx_last = _perf()
        _base(self, data)  # runs once per socket read and per read of the body: skip super()
        body = response_body(self)
        if body is not None:
            n = body.total_bytes
            if body is not self.rx_body:
                self.rx_body, self.rx_marks = body, []
            marks = self.rx_marks
            if n and (not marks or marks[-1][0] != n):
                marks.append((n, t))


class WireBody(Payload):
    """The request body, in pieces sent in order, noting when aiohttp handed it to the socket.

    aiohttp writes the body from a task of its own (on Python 3.11 it starts on the event
    loop's next turn), after any wait for a pooled connection and the connect: the time the
    bytes went (`t_write`) is known only here. The first write sends the headers and the first
    piece in one call; the socket takes what its buffer holds at once, the rest follows as the
    server reads. Pieces are not joined: a token-id prompt's JSON goes from its own buffer.
    """

    t_write = 0.0
    proto: object = None  # the connection's protocol, as the write found it

    def __init__(self, pieces: Sequence[bytes | memoryview]) -> None:
        super().__init__(pieces, content_type="application/json")
        self.pieces = pieces
        self.nbytes = sum(len(p) for p in pieces)

    @property
    def size(self) -> int:
        return self.nbytes

    async def write(self, writer) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer, content_length) -> None:
        self.t_write, self.proto = _perf(), writer.protocol
        left = self.nbytes if content_length is None else content_length
        for piece in self.pieces:
            if left <= 0:
                break
            await writer.write(piece if len(piece) <= left else piece[:left])
            left -= len(piece)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return b"".join(self.pieces).decode(encoding, errors)

    async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"".join(self.pieces)


def marks_of(proto: StampingProtocol | None, content) -> list[tuple[int, float]] | None:
    """The arrival marks of this response's body, once its first bytes are in."""
    return proto.rx_marks if proto is not None and proto.rx_body is content else None


def split_at_marks(
    raw: bytes, done: int, marks: list[tuple[int, float]], fallback: float
) -> list[tuple[bytes, float]]:
    """A read of body bytes `done .. done + len(raw)`, cut where the marks say arrivals ended,
    each piece with its arrival time (bytes past the last mark: `fallback`). Uses up the marks."""
    pieces, at, end = [], 0, done + len(raw)
    while marks and marks[0][0] <= end:
        n, t = marks.pop(0)
        pieces.append((raw[at : n - done], t))
        at = n - done
    if at < len(raw):
        pieces.append((raw[at:], fallback))
    return pieces
