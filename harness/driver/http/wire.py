"""The bytes on the wire, timed: HTTP/1.1 exchanges on keep-alive connections (pool.py keeps
them, and opens them: directly, through a proxy, over TLS).

The HTTP target streams every request through here, not through aiohttp's client session
(docs/measurements/driver.md, "the target's own wire": aiohttp's request and response objects
cost ~150 µs a request on the 2-core machine, more than any part of the replay); so do the
harness's plain requests (client.py: the preflight, the /metrics scrape, `harness probe`). A
request goes out whole: its head and its body's pieces in one `writelines`, stamped (`t_write`:
the request's TTFT counts from there). The answer is parsed by httptools (llhttp, the parser Node.js uses) in
the connection's `data_received`, the event loop's I/O callback: each read is stamped when the
loop read it, and the body's bytes go to the request's consumer (`take`) right there, before any
task runs. The task that sent the request wakes once, when the response has ended.

A response that is not a 200 event stream (an error status, a JSON reply) is kept, up to
`COLLECT_BYTES`, for the failure's message (unless the sender asked for every body: the plain
client's). The connection goes back to the pool only after a response that ended whole and said
keep-alive; any other ending closes it (a cut stream, a stopped read, a deadline, a cancelled
request: the server sees the client leave). It is kept idle no longer than the network's
`keepalive_s`, nor than the server's own `Keep-Alive: timeout=` less a margin.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Sequence
from urllib.parse import quote

import httptools

from harness.driver.endpoint import basic_auth, parse_endpoint
from harness.driver.http.network import Network, Proxy

_perf = time.perf_counter

COLLECT_BYTES = 64 * 1024  # of a response that is not an event stream: enough for its message
SERVER_MARGIN_S = 1.0  # reuse no later than this before the server's Keep-Alive timeout
_TIMEOUT = re.compile(r"timeout\s*=\s*(\d+)", re.IGNORECASE)

Take = Callable[[bytes, float], bool]  # body bytes and their arrival; True: stop reading


class WireError(Exception):
    """A request that failed on the wire, before or instead of a response: `error_class` is the
    record's (ConnectError, ConnectTimeout, ConnectionClosed, BadResponse)."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class Endpoint:
    """One URL made ready to send to: where to connect (the server, or the proxy on its way),
    and the head every request to it starts with (request line, Host, the caller's headers,
    basic auth from the URL, the proxy's credentials for an http:// URL it forwards)."""

    __slots__ = ("url", "key", "host", "port", "tls", "proxy", "head")

    def __init__(
        self, url: str, headers: dict[str, str], network: Network, method: str = "POST"
    ) -> None:
        parts = parse_endpoint(url)  # raises ValueError naming what is wrong
        self.url = url
        self.tls = parts.scheme == "https"
        self.host = parts.host.strip("[]")  # an IPv6 address connects without its brackets
        self.port = parts.port or (443 if self.tls else 80)
        self.proxy: Proxy | None = network.proxy_for(parts.scheme, self.host, self.port)
        self.key = (self.host, self.port, self.tls, self.proxy.key if self.proxy else None)
        path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
        target = path + ("?" + parts.query if parts.query else "")
        host = parts.host if parts.port is None else f"{parts.host}:{parts.port}"
        if self.proxy is not None and not self.tls:  # absolute form: the proxy forwards it
            target = f"http://{host}{target}"
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        auth = basic_auth(url)
        if auth is not None:  # credentials in the URL (a header of that name is refused then)
            lines.append(f"Authorization: {auth}")
        if self.proxy is not None and not self.tls and self.proxy.authorization:
            lines.append(f"Proxy-Authorization: {self.proxy.authorization}")
        self.head = ("\r\n".join(lines) + "\r\n").encode()

    @property
    def where(self) -> str:
        """host:port, TLS or not, and the proxy on the way: what an error names."""
        text = f"{self.host}:{self.port}" + (" (TLS)" if self.tls else "")
        return text + (f" through the proxy {self.proxy.shown}" if self.proxy else "")


class Response:
    """What came back for one request, filled by its connection as it arrives."""

    __slots__ = (
        "status",
        "reason",
        "headers",
        "body",
        "error",
        "t_write",
        "ended",
        "head",
        "answered",
        "reused",
    )

    def __init__(self, t_write: float, ended: asyncio.Future, reused: bool) -> None:
        self.t_write = t_write
        self.ended = ended  # resolved when the exchange has ended, whole or not
        self.head: asyncio.Future | None = None  # the sender's, resolved at the final status
        self.answered = False  # any byte came back (a resend is safe only before one did)
        self.reused = reused  # sent on a connection that had carried an exchange before
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
        "keep_until",
        "uses",
        "_keepalive",
        "_parser",
        "_resp",
        "_take",
        "_consumer",
        "_t",
        "_keep",
        "_until_eof",
        "_inflate",
        "_raw",
        "_every",
    )

    def __init__(self, key: tuple, keepalive_s: float) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_until = 0.0  # reused only before this (perf_counter): see _idle_for
        self.uses = 0  # exchanges sent on it
        self._keepalive = keepalive_s
        self._parser = httptools.HttpResponseParser(self)
        self._resp: Response | None = None
        self._take: Take | None = None  # where body bytes go: the consumer, or the collector
        self._consumer: Take | None = None
        self._t = 0.0  # when the bytes being parsed were read
        self._keep = False
        self._until_eof = False  # the body ends when the connection does (no length, unchunked)
        self._inflate: zlib._Decompress | None = None
        self._every = False  # every body to the consumer, whatever its status and type
        self._raw = False  # bodies as they came, in their content coding

    # ---- one exchange --------------------------------------------------------------------------

    def send(
        self,
        head: bytes,
        body: Sequence[bytes | memoryview],
        take: Take,
        every_body: bool = False,
        raw: bool = False,
    ) -> Response:
        """Write a request (`head` ends with the blank line); its response, filled as it comes.
        The response's body goes to `take` when it is a 200 event stream (any body, with
        `every_body`), decoded from gzip or deflate (as it came, with `raw`: a proxy passes it
        on); `Response.ended` resolves when the exchange has ended, whole or not."""
        assert self.transport is not None and self._resp is None, "one exchange at a time"
        self._consumer, self._take, self._every, self._raw = take, None, every_body, raw
        self._keep = self._until_eof = False
        self._inflate = None
        loop = asyncio.get_running_loop()
        resp = self._resp = Response(_perf(), loop.create_future(), self.uses > 0)
        self.uses += 1
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
        if resp.head is not None and not resp.head.done():
            resp.head.set_result(None)
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
        resp = self._resp
        if resp is None:  # bytes nobody asked for: the connection cannot be trusted
            self.abort()
            return
        resp.answered = True
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
        elif resp.status == 0 and isinstance(exc, ssl.SSLError):  # e.g. no client certificate
            self._end(tls_error(exc, "the server ended TLS"))
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
        if self._raw:
            pass
        elif coding in ("gzip", "deflate", "x-gzip"):  # asked for identity, but a server may not
            self._inflate = zlib.decompressobj(wbits=47)  # gzip or zlib, from the header
        elif coding != "identity":
            self._end(
                WireError("BadResponse", f"a body in {coding!r}, which this client cannot read")
            )
            self.abort()
            return
        stream = self._every or (status == 200 and resp.content_type != "application/json")
        self._take = self._consumer if stream else self._collect
        if resp.head is not None and not resp.head.done():
            resp.head.set_result(None)

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
        self.keep_until = _perf() + self._idle_for(resp.headers.get("keep-alive"))
        self._end()

    def _idle_for(self, keep_alive: str | None) -> float:
        """Seconds this connection may wait idle: ours, or the server's timeout less a margin."""
        found = _TIMEOUT.search(keep_alive) if keep_alive else None
        if found is None:
            return self._keepalive
        return min(self._keepalive, int(found.group(1)) - SERVER_MARGIN_S)

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


def tls_error(exc: ssl.SSLError, where: str, trusted: str | None = None) -> WireError:
    """A TLS failure as one line naming the option that fixes it (and the CAs it was checked
    against: REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE set elsewhere outrank SSL_CERT_FILE)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or str(exc)
        against = f" by {trusted}" if trusted else ""
        fix = (
            "trust its CA with --ca-bundle FILE (target.network.ca_bundle, or REQUESTS_CA_BUNDLE"
            " / SSL_CERT_FILE), or skip the check with --insecure"
        )
        return WireError("TLSError", f"{where}: certificate not trusted{against} ({why}); {fix}")
    reason = exc.reason or str(exc)
    fix = ""
    if "CERTIFICATE_REQUIRED" in reason or "HANDSHAKE_FAILURE" in reason:
        fix = "; the server may want a client certificate: --client-cert FILE --client-key FILE"
    elif "UNKNOWN_CA" in reason or "BAD_CERTIFICATE" in reason:
        fix = "; the server does not accept the client certificate given (--client-cert)"
    return WireError("TLSError", f"{where}: TLS failed ({reason}){fix}")
