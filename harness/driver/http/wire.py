"""The bytes on the wire, timed: HTTP/1.1 exchanges on pooled keep-alive connections.

The HTTP target streams every request through here, not through aiohttp's client session
(docs/driver.md, "Driver overhead": aiohttp's request and response objects cost ~180 µs a
request on the 2-core machine, more than all of the replay's own work). A request goes out
whole: its head and its body's pieces in one `writelines`, stamped (`t_write`: the request's
TTFT counts from there). The answer is parsed by httptools (llhttp, the parser Node.js uses) in
the connection's `data_received`, the event loop's I/O callback: each read is stamped when the
loop read it, and the body's bytes go to the request's consumer (`take`) right there, before any
task runs. The task that sent the request wakes once, when the response has ended.

A response that is not a 200 event stream (an error status, a JSON reply) is kept, up to
`COLLECT_BYTES`, for the failure's message. The connection goes back to the pool only after a
response that ended whole and said keep-alive; any other ending closes it (a cut stream, a
stopped read, a deadline, a cancelled request: the server sees the client leave).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from urllib.parse import quote

import httptools

from harness.driver.endpoint import basic_auth, parse_endpoint

_perf = time.perf_counter

COLLECT_BYTES = 64 * 1024  # of a response that is not an event stream: enough for its message
KEEPALIVE_S = 15.0  # an idle connection older than this is closed, not reused (aiohttp's default)

Take = Callable[[bytes, float], bool]  # body bytes and their arrival; True: stop reading


class WireError(Exception):
    """A request that failed on the wire, before or instead of a response: `error_class` is the
    record's (ConnectError, ConnectTimeout, ConnectionClosed, BadResponse)."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class Endpoint:
    """One endpoint's URL made ready to send to: where to connect, and the head every request
    to it starts with (request line, Host, the target's own headers, basic auth from the URL)."""

    __slots__ = ("key", "host", "port", "tls", "head")

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = parse_endpoint(url)  # raises ValueError naming what is wrong
        self.tls = parts.scheme == "https"
        self.host = parts.host.strip("[]")  # an IPv6 address connects without its brackets
        self.port = parts.port or (443 if self.tls else 80)
        self.key = (self.host, self.port, self.tls)
        path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
        target = path + ("?" + parts.query if parts.query else "")
        host = parts.host if parts.port is None else f"{parts.host}:{parts.port}"
        lines = [f"POST {target} HTTP/1.1", f"Host: {host}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        auth = basic_auth(url)
        if auth is not None:  # credentials in the URL (a header of that name is refused then)
            lines.append(f"Authorization: {auth}")
        self.head = ("\r\n".join(lines) + "\r\n").encode()


class Response:
    """What came back for one request, filled by its connection as it arrives."""

    __slots__ = ("status", "reason", "headers", "body", "error", "t_write", "ended")

    def __init__(self, t_write: float, ended: asyncio.Future) -> None:
        self.t_write = t_write
        self.ended = ended  # resolved when the exchange has ended, whole or not
        self.status = 0  # 0: no status line yet
        self.reason = ""
        self.headers: dict[str, str] = {}  # names in lower case
        self.body = bytearray()  # a response that is not a 200 event stream, up to COLLECT_BYTES
        self.error: WireError | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").partition(";")[0].strip().lower()


class Connection(asyncio.Protocol):
    """One keep-alive connection: one exchange at a time, its response parsed as it arrives."""

    __slots__ = (
        "key",
        "transport",
        "closed",
        "idle_since",
        "_parser",
        "_resp",
        "_take",
        "_consumer",
        "_t",
        "_keep",
        "_until_eof",
        "_inflate",
    )

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._resp: Response | None = None
        self._take: Take | None = None  # where body bytes go: the consumer, or the collector
        self._consumer: Take | None = None
        self._t = 0.0  # when the bytes being parsed were read
        self._keep = False
        self._until_eof = False  # the body ends when the connection does (no length, unchunked)
        self._inflate: zlib._Decompress | None = None

    # ---- one exchange --------------------------------------------------------------------------

    def send(self, head: bytes, body: Sequence[bytes | memoryview], take: Take) -> Response:
        """Write a request (`head` ends with the blank line); its response, filled as it comes.
        The response's body goes to `take` when it is a 200 event stream; `Response.ended`
        resolves when the exchange has ended, whole or not."""
        assert self.transport is not None and self._resp is None, "one exchange at a time"
        self._consumer, self._take = take, None
        self._keep = self._until_eof = False
        self._inflate = None
        resp = self._resp = Response(_perf(), asyncio.get_running_loop().create_future())
        if self.closed:  # closed between its connect and this send: nothing would answer
            self._end(WireError("ConnectionClosed", "the connection closed before the request"))
            return resp
        self.transport.writelines((head, *body))
        return resp

    def cancel(self, why: WireError | None = None) -> None:
        """End the exchange now (a deadline passed, the target closed): the connection is
        closed, so the server sees the client leave."""
        self._end(why)
        self.abort()

    @property
    def reusable(self) -> bool:
        return not self.closed and self._keep and self._resp is None

    def _end(self, error: WireError | None = None) -> None:
        resp = self._resp
        if resp is None:
            return
        if error is not None and resp.error is None:
            resp.error = error
        self._resp = self._take = self._consumer = None  # the consumer holds the request's parts
        if not resp.ended.done():  # (cancelled with the task that awaited it)
            resp.ended.set_result(None)

    # ---- the protocol's callbacks --------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self._resp is None:  # bytes nobody asked for: the connection cannot be trusted
            self.abort()
            return
        self._t = _perf()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # the consumer raised: a bug, one record
            cause = exc.__context__ or exc
            self._end(WireError(type(cause).__name__, f"reading the response raised: {cause}"))
            self.abort()
        except httptools.HttpParserError as exc:
            self._end(WireError("BadResponse", f"an invalid HTTP response: {exc}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        resp = self._resp
        if resp is None:
            return
        if self._until_eof and resp.status:  # the connection's end is the body's
            if self._inflate is not None:
                self._deliver(self._inflate.flush())
            self._end()
        elif resp.status == 0 and isinstance(exc, OSError):  # e.g. a reset while sending
            self._end(WireError("ConnectError", f"{type(exc).__name__}: {exc}"))
        else:
            why = f": {exc}" if exc else ""
            self._end(WireError("ConnectionClosed", f"the server closed the connection{why}"))

    def eof_received(self) -> bool:
        return False  # close: a half-closed connection is no use to HTTP/1.1

    # httptools' callbacks (only those defined are called)

    def on_status(self, status: bytes) -> None:
        if self._resp is not None:
            self._resp.reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._resp is not None:
            self._resp.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        resp = self._resp
        if resp is None:
            return
        status = self._parser.get_status_code()
        if status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            resp.reason, resp.headers = "", {}
            return
        resp.status = status
        self._keep = self._parser.should_keep_alive()
        headers = resp.headers
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._until_eof = not chunked and "content-length" not in headers
        coding = headers.get("content-encoding", "identity").strip().lower()
        if coding in ("gzip", "deflate", "x-gzip"):  # asked for identity, but a server may not
            self._inflate = zlib.decompressobj(wbits=47)  # gzip or zlib, from the header
        elif coding != "identity":
            self._end(
                WireError("BadResponse", f"a body in {coding!r}, which this client cannot read")
            )
            self.abort()
            return
        stream = status == 200 and resp.content_type != "application/json"
        self._take = self._consumer if stream else self._collect

    def on_body(self, body: bytes) -> None:
        if self._inflate is not None:
            body = self._inflate.decompress(body)
        self._deliver(body)

    def on_message_complete(self) -> None:
        resp = self._resp
        if resp is None or resp.status == 0:  # none, or the end of an interim answer
            return
        if self._inflate is not None:
            self._deliver(self._inflate.flush())
        self.idle_since = _perf()
        self._end()

    # ---- the body ------------------------------------------------------------------------------

    def _deliver(self, body: bytes) -> None:
        take = self._take
        if take is not None and body and take(body, self._t):  # stop: the rest is not read
            self._end()
            self.abort()

    def _collect(self, body: bytes, t: float) -> bool:
        resp = self._resp
        assert resp is not None
        resp.body += body
        return len(resp.body) >= COLLECT_BYTES

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class Pool:
    """Keep-alive connections by endpoint, at most `limit` of them in use at once (what is idle
    does not count, as in aiohttp's connector); a request waits for a free one in turn."""

    def __init__(self, limit: int, connect_timeout: float) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._idle: dict[tuple, deque[Connection]] = {}
        self._open: set[Connection] = set()  # in use or idle: what `close` closes
        self._timeout = connect_timeout
        self._tls: ssl.SSLContext | None = None

    async def acquire(self, ep: Endpoint) -> Connection:
        """A connection to `ep`: an idle one, or a new one. WireError if it cannot connect."""
        await self._slots.acquire()
        try:
            idle = self._idle.get(ep.key)
            now = _perf()
            while idle:
                conn = idle.pop()  # the most recently used: the least likely to be closed
                if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                    return conn
                self._drop(conn)
            conn = await self._connect(ep)
            self._open.add(conn)
            return conn
        except BaseException:
            self._slots.release()
            raise

    def release(self, conn: Connection) -> None:
        """`conn` is free: kept for the next request when its last response allows it."""
        self._slots.release()
        if conn.reusable:
            self._idle.setdefault(conn.key, deque()).append(conn)
        else:
            self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        conn.abort()
        self._open.discard(conn)

    async def _connect(self, ep: Endpoint) -> Connection:
        loop = asyncio.get_running_loop()
        tls = self._context() if ep.tls else None
        where = f"{ep.host}:{ep.port}" + (" (TLS)" if ep.tls else "")
        try:
            async with asyncio.timeout(self._timeout):
                _, conn = await loop.create_connection(
                    lambda: Connection(ep.key),
                    ep.host,
                    ep.port,
                    ssl=tls,
                    server_hostname=ep.host if tls else None,
                )
        except TimeoutError:
            why = f"no connection to {where} within {self._timeout}s"
            raise WireError("ConnectTimeout", why) from None
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
            raise WireError("ConnectError", f"cannot connect to {where}: {why}") from None
        return conn

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def close(self) -> None:
        """Close every connection, idle or still in use (a request left in flight ends)."""
        why = WireError("ConnectionClosed", "the target closed with the request in flight")
        for conn in self._open:
            conn.cancel(why)
        self._open.clear()
        self._idle.clear()
