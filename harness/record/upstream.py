"""The proxy's upstream side: one request forwarded, its response's bytes as they arrive.

Everything the proxy asks of an HTTP client is `forward` (a method, a URL, headers and a body
in; status, headers and the body's bytes out, as each read brings them). It is the harness's
own client (`harness.driver.http.HTTPClient`: its wire, and the network settings every verb
has, a proxy from `HTTPS_PROXY` and a CA bundle from `REQUESTS_CA_BUNDLE` included, docs/
driver.md), asked for the answer as it came (`raw`): not decoded from its content coding (a
gzip body stays gzip), a redirect passed to the agent rather than followed, and no deadline of
its own (an agent's client has its own; a stream may idle for minutes). Header names reach
the agent in lower case, as HTTP/2 sends them; a repeated header keeps its last value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from harness.driver.http import ClientResponse, HTTPClient, Network, NetworkSettings

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
REQUEST_ONLY = frozenset({"host", "content-length"})  # the client writes its own
LIMIT = 1024  # requests in flight upstream at once (an agent fleet's, not a benchmark's)


@dataclass
class Upstream:
    """What the upstream answered: status line, headers, the body's bytes as they come."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes]


def client() -> HTTPClient:
    """The client every forwarded request goes through (one per proxy)."""
    return HTTPClient(Network(NetworkSettings()), timeout=None, limit=LIMIT)


def forwarded(
    headers: list[tuple[str, str]], drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() not in drop]


def _sent(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The request's headers, names in one case (the client's defaults are replaced, not
    doubled, by the agent's own User-Agent or Accept-Encoding)."""
    return {"-".join(w.capitalize() for w in k.split("-")): v for k, v in headers}


async def _body(resp: ClientResponse) -> AsyncIterator[bytes]:
    async for piece in resp:
        yield piece
    if resp.error is not None:  # the upstream's body ended early: so does the agent's
        raise resp.error


@asynccontextmanager
async def forward(
    http: HTTPClient, method: str, url: str, headers: list[tuple[str, str]], body: bytes
) -> AsyncIterator[Upstream]:
    """Send one request upstream; the response streams while the context is open (a
    `WireError` when it cannot be sent or its body is cut)."""
    resp = await http.request(method, url, _sent(forwarded(headers, REQUEST_ONLY)), body, raw=True)
    try:
        answered = forwarded(list(resp.headers.items()))
        yield Upstream(resp.status, resp.reason, answered, _body(resp))
    finally:
        resp.close()
