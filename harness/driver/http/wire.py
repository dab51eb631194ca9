"""The bytes on the wire, timed: when a request's body went to the socket, and when each piece of
a response body arrived. The HTTP target (target.py) builds on aiohttp with these.
"""

from __future__ import annotations

import asyncio
import sys
import time
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import Any

from aiohttp import ClientRequest
from aiohttp.payload import Payload

from harness.driver.http.aiohttp_internals import ResponseHandler, response_body, unstamped_body

_perf = time.perf_counter


class StampingProtocol(ResponseHandler):
    """aiohttp's protocol, noting when each piece of a response body arrived.

    `data_received` runs in the event loop's I/O phase, as soon as the loop polls the socket and
    before the tasks it wakes. Once a `BodyReader` is attached (`rx_reader`), the body goes to
    it here, as it arrives, stamped. Before that (the bytes that came with the headers, or
    before the task that sent the request ran again), each call that grows the current
    response's body appends a mark `(body bytes so far, time)`, and the reader splits those
    bytes at the marks, so every event is stamped with its own arrival. (Stamping them all with
    the last arrival would give a first token that came with the headers the time of the tail
    that came a loop turn later.) `rx_last` is the latest arrival of any bytes.
    """

    rx_last = 0.0
    rx_body: object = None  # the StreamReader the marks are of
    rx_marks: list[tuple[int, float]] = []
    rx_reader: BodyReader | None = None

    def data_received(self, data: bytes, _base=ResponseHandler.data_received) -> None:
        if not data:  # aiohttp's own call when a read frees its buffer: nothing arrived
            return _base(self, data)
        t = self.rx_last = _perf()
        _base(self, data)  # runs once per socket read and per read of the body: skip super()
        if self.rx_reader is not None:
            return self.rx_reader.arrived(t)
        body = response_body(self)
        if body is not None:
            n = body.total_bytes
            if body is not self.rx_body:
                self.rx_body, self.rx_marks = body, []
            marks = self.rx_marks
            if n and (not marks or marks[-1][0] != n):
                marks.append((n, t))

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        if self.rx_reader is not None:  # the body's error (or end), set by aiohttp just now
            self.rx_reader.arrived(_perf())


class BodyReader:
    """Reads one response body as it arrives, from the connection's `data_received`.

    Each arrival goes to `take(piece, t)` in the event loop's I/O callback, stamped with its
    own time: the reading task is not woken once per network read, only at the body's end.
    That wake, with the future, iterator and coroutine chain each read went through, was most
    of what the driver cost per token beyond a raw reader (benchmarks/bench_driver.py). The
    bytes that came before the reader was attached (with the headers, say) are split at the
    connection's marks.
    `take` returns True to stop reading (a bad event); `stop()` ends the read from outside.
    """

    __slots__ = ("_proto", "_content", "_take", "_arrivals", "_done")

    def __init__(
        self, proto: StampingProtocol, content, take: Callable[[bytes, float], bool]
    ) -> None:
        self._arrivals = Arrivals(proto, content)  # raises unless the protocol saw this body
        self._proto, self._content, self._take = proto, content, take
        self._done: asyncio.Future | None = None

    async def read(self) -> None:
        """Every piece into `take`, until the body ends (its error raised) or reading stops."""
        raw = self._content.read_nowait(-1)  # raises the body's error, if any
        for piece, t in self._arrivals.split(raw) if raw else ():
            if self._take(piece, t):
                return
        if self._content.at_eof():
            return
        self._done = asyncio.get_running_loop().create_future()
        self._proto.rx_reader = self
        try:
            await self._done
        finally:
            self._proto.rx_reader = None

    def arrived(self, t: float) -> None:
        """New bytes (or the end, or an error) in the body; from the protocol's callbacks."""
        done = self._done
        try:
            raw = self._content.read_nowait(-1)
            if (raw and self._take(raw, t)) or self._content.at_eof():
                self.stop()
        except Exception as exc:  # the body's error, or a bug in `take`: the reading task's
            self._proto.rx_reader = None
            if done is not None and not done.done():
                done.set_exception(exc)

    def stop(self) -> None:
        self._proto.rx_reader = None
        if self._done is not None and not self._done.done():
            self._done.set_result(None)


class WireBody(Payload):
    """The request body, in pieces sent in order, noting when aiohttp handed it to the socket.

    aiohttp writes the body from a task of its own (started at once, see `EagerRequest`), after
    any wait for a pooled connection and the connect: the time the bytes went (`t_write`) is
    known only here. The first write sends the headers and the first
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


class EagerRequest(ClientRequest):
    """aiohttp's request, its body written at once by the task that sends it.

    aiohttp writes the body from a task of its own; from Python 3.12 that task starts eagerly
    (it runs up to its first wait inside `send`), but on 3.11 it starts on the event loop's next
    turn, and at 256 streams a turn takes milliseconds: the closed loop's gap between one
    request's end and the next one's bytes on the wire (docs/driver.md, "Driver overhead").
    This starts it the 3.12 way: aiohttp's own `write_bytes`, run up to its first wait now, the
    rest (if any) left to the task.
    """

    def write_bytes(self, writer, conn, content_length=None):
        return started(super().write_bytes(writer, conn, content_length))


def request_class() -> type[ClientRequest]:
    """The session's request class: `EagerRequest` where aiohttp's own write is not eager."""
    return EagerRequest if sys.version_info < (3, 12) else ClientRequest


def started(coro: Coroutine[Any, Any, Any]) -> Coroutine[Any, Any, Any]:
    """`coro` run up to its first wait now (as an eager task starts); what is left of it."""
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        return _result(stop.value)
    except BaseException as exc:  # the task it goes to raises it, as the task would have
        return _raise(exc)
    return _resume(coro, waiting)


async def _result(value: Any) -> Any:
    return value


async def _raise(exc: BaseException) -> Any:
    raise exc


async def _resume(coro: Coroutine[Any, Any, Any], waiting: Any) -> Any:
    return await _rest(coro, waiting)


@types.coroutine
def _rest(coro: Coroutine[Any, Any, Any], waiting: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine that is waiting on `waiting`: what it yields goes to the task,
    what the task sends or throws goes back in."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                waiting = coro.send(sent)
            except StopIteration as stop:
                return stop.value


class Arrivals:
    """When the bytes of one response body read so far arrived, from its connection's marks.

    Made right after the headers, in the task that sent the request: the connection cannot
    have gone back to the pool yet (aiohttp releases it at the body's end, from that task's
    `start()`), so the marks found are this body's. None found means aiohttp no longer reports
    the body that grew (`aiohttp_internals.response_body`): that fails loudly, never "now".
    """

    __slots__ = ("_proto", "_marks", "_done")

    def __init__(self, proto: object, content: object) -> None:
        if not isinstance(proto, StampingProtocol) or proto.rx_body is not content:
            raise unstamped_body(type(proto).__name__)
        self._proto, self._marks, self._done = proto, proto.rx_marks, 0

    def split(self, raw: bytes) -> Sequence[tuple[bytes, float]]:
        """The pieces of the next read, each with its arrival time."""
        marks, done = self._marks, self._done
        self._done = end = done + len(raw)
        if marks and marks[0][0] == end:  # the usual: one arrival, read whole
            return ((raw, marks.pop(0)[1]),)
        return split_at_marks(raw, done, marks, self._proto.rx_last)


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
