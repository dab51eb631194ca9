"""The proxy's upstream side: one request forwarded, its response's bytes as they arrive.

Everything the proxy asks of an HTTP client is `forward` (a method, a URL, headers and a body
in; status, headers and the body's raw bytes out, as each read brings them), so moving to
another client is one edit here. It is aiohttp's client today: no decompression (the client
gets the upstream's bytes, encoded as they came), no timeouts of its own (an agent's client has
its own; a stream may idle for minutes), a proxy from the environment (`HTTPS_PROXY`, ...) as
`curl` reads them, looked up once.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

# Hop-by-hop headers (RFC 9110, 7.6.1) are the connection's, not the message's: never forwarded.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
REQUEST_ONLY = frozenset({"host", "content-length"})  # the client session writes its own


@dataclass
class Upstream:
    """What the upstream answered: status line, headers (names as sent, in order), body."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes]


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`,
    lower case too, as curl reads them), read once rather than on every request."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies_environment().get(parts.scheme)


def client(upstream_url: str) -> aiohttp.ClientSession:
    """The session every forwarded request goes through (one per proxy)."""
    connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        auto_decompress=False,
        proxy=env_proxy(upstream_url),
    )


def forwarded(
    headers: list[tuple[str, str]], drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() not in drop]


@asynccontextmanager
async def forward(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
) -> AsyncIterator[Upstream]:
    """Send one request upstream; the response streams while the context is open."""
    async with session.request(
        method,
        url,
        headers=forwarded(headers, REQUEST_ONLY),
        data=body if body else None,
        allow_redirects=False,
        skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
    ) as resp:
        raw = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
        yield Upstream(resp.status, resp.reason or "", forwarded(raw), resp.content.iter_any())
