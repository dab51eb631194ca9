"""Keep-alive connections by endpoint, opened as the user's network asks: directly, through a
forward proxy (an http:// URL in absolute form, an https:// one through a CONNECT tunnel, as curl
does) and over TLS with the network's one context (network.py).

A failure to connect is one `WireError` line naming where it tried: `ConnectError` and
`ConnectTimeout` (the server or the proxy), `ProxyError` (the proxy refused the tunnel),
`TLSError` (with the option that fixes it).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque

from harness.driver.http.network import Network, Proxy
from harness.driver.http.wire import Connection, Endpoint, WireError, tls_error

_perf = time.perf_counter

TUNNEL_REPLY_BYTES = 16 * 1024  # a proxy's answer to CONNECT longer than this is not one


class Pool:
    """At most `limit` connections in use at once (what is idle does not count, as in aiohttp's
    connector); a request waits for a free one in turn. An idle one is reused, most recent
    first, while its keep-alive lasts (wire.py), or a new one is opened."""

    def __init__(self, limit: int, connect_timeout: float, network: Network) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._idle: dict[tuple, deque[Connection]] = {}
        self._open: set[Connection] = set()  # in use or idle: what `close` closes
        self._timeout = connect_timeout
        self.network = network
        self.closed = False

    async def acquire(self, ep: Endpoint, fresh: bool = False) -> Connection:
        """A connection to `ep`: an idle one (unless `fresh`), or a new one. WireError if it
        cannot connect."""
        await self._slots.acquire()
        try:
            idle = self._idle.get(ep.key)
            now = _perf()
            while idle and not fresh:
                conn = idle.pop()  # the most recently used: the least likely to be closed
                if not conn.closed and now < conn.keep_until:
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
        conn = Connection(ep.key, self.network.settings.keepalive_s)
        try:
            async with asyncio.timeout(self._timeout):
                await self._open_to(ep, conn)
        except TimeoutError:
            conn.abort()
            why = f"no connection to {ep.where} within {self._timeout}s"
            raise WireError("ConnectTimeout", why) from None
        except ssl.SSLError as exc:
            conn.abort()
            raise tls_error(exc, f"TLS to {ep.where}", self.network.trusted) from None
        except OSError as exc:
            conn.abort()
            why = exc.strerror or str(exc) or type(exc).__name__
            raise WireError("ConnectError", f"cannot connect to {ep.where}: {why}") from None
        return conn

    async def _open_to(self, ep: Endpoint, conn: Connection) -> None:
        loop = asyncio.get_running_loop()
        tls = self.network.tls_context() if ep.tls else None
        name = ep.host if tls else None
        if ep.proxy is None:
            await loop.create_connection(
                lambda: conn, ep.host, ep.port, ssl=tls, server_hostname=name
            )
        elif tls is None:  # the proxy forwards each request, written in absolute form
            await loop.create_connection(lambda: conn, ep.proxy.host, ep.proxy.port)
        else:
            await _tunnel(ep, ep.proxy, conn, tls)

    def close(self) -> None:
        """Close every connection, idle or still in use (a request left in flight ends)."""
        why = WireError("ConnectionClosed", "the target closed with the request in flight")
        self.closed = True
        for conn in self._open:
            conn.cancel(why)
        self._open.clear()
        self._idle.clear()


async def _tunnel(ep: Endpoint, proxy: Proxy, conn: Connection, tls: ssl.SSLContext) -> None:
    """A CONNECT tunnel through `proxy` to `ep`, TLS inside it, `conn` speaking over it."""
    loop = asyncio.get_running_loop()
    transport, opening = await loop.create_connection(_Opening, proxy.host, proxy.port)
    try:
        authority = f"[{ep.host}]:{ep.port}" if ":" in ep.host else f"{ep.host}:{ep.port}"
        lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
        if proxy.authorization:
            lines.append(f"Proxy-Authorization: {proxy.authorization}")
        transport.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        status, reason = await opening.reply
        if status != 200:
            raise WireError("ProxyError", _refusal(proxy, authority, status, reason))
        inner = await loop.start_tls(transport, conn, tls, server_hostname=ep.host)
    except BaseException:
        transport.abort()
        raise
    if inner is None:  # the transport closed while TLS started
        raise ConnectionResetError("the proxy closed the tunnel")
    conn.connection_made(inner)


def _refusal(proxy: Proxy, authority: str, status: int, reason: str) -> str:
    why = f"the proxy {proxy.shown} refused CONNECT {authority}: HTTP {status} {reason}".strip()
    if status == 407:
        return why + " (it wants credentials: http://user:password@host:port as the proxy URL)"
    return why


class _Opening(asyncio.Protocol):
    """A proxy's answer to CONNECT: its status line, once its head has come."""

    def __init__(self) -> None:
        self.reply: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self._buf += data
        end = self._buf.find(b"\r\n\r\n")
        if self.reply.done() or (end < 0 and len(self._buf) < TUNNEL_REPLY_BYTES):
            return
        line = bytes(self._buf[: self._buf.find(b"\r\n")]).decode("latin-1")
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit() or not parts[0].startswith("HTTP/"):
            self.reply.set_exception(WireError("ProxyError", f"not an HTTP answer: {line[:80]!r}"))
            return
        self.reply.set_result((int(parts[1]), parts[2] if len(parts) > 2 else ""))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.reply.done():
            self.reply.set_exception(ConnectionResetError("the proxy closed the connection"))
