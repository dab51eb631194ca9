"""The capture proxy: an HTTP server that forwards every request to the upstream, byte for byte.

Any method and path is forwarded (`/v1/models` too, so an agent's start-up checks pass); the
requests of the four APIs (`record.conversation.API_PATHS`) are also captured. The client's
headers go upstream as they came (its API key included: it is forwarded, never kept), but for
the hop-by-hop ones; the upstream's status, headers and body come back as they came, each read
written to the client as soon as it arrives (an event stream stays a stream; a gzip body stays
gzip). A copy of the exchange goes to the `sink` when the request arrives and when it ends.

URL mapping: the request's path is appended to the upstream URL's, one `/v1` dropped where both
have it (`--upstream https://host/v1` with a client at `http://127.0.0.1:PORT/v1`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from harness.driver.http import HTTPClient, WireError
from harness.record import upstream
from harness.record.capture import Exchange, session_headers
from harness.record.conversation import api_of

log = logging.getLogger(__name__)
Sink = Callable[[str, Exchange], None]  # ("arrived" | "ended", the exchange)
CLIENT_MAX = 1024 * 2**20  # the largest request body read (a long agent context is megabytes)
CLIENT_KEY = web.AppKey("client", HTTPClient)


def target_url(base: str, path: str, query: str) -> str:
    """Where a request for `path` goes upstream (the module's URL mapping)."""
    parts = urlsplit(base)
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
        path = path[3:]
    url = f"{parts.scheme}://{parts.netloc}{prefix}{path}"
    return f"{url}?{query}" if query else url


class Proxy:
    def __init__(self, upstream_url: str, sink: Sink) -> None:
        self.upstream_url, self.sink = upstream_url, sink
        self._ids = itertools.count()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=CLIENT_MAX)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        app.cleanup_ctx.append(self._client)
        return app

    async def _client(self, app: web.Application):
        app[CLIENT_KEY] = upstream.client()
        yield
        app[CLIENT_KEY].close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        api = api_of(request.path) if request.method == "POST" else None
        ex = None
        if api is not None:
            ex = Exchange(
                next(self._ids),
                request.path,
                api,
                time.perf_counter(),
                body,
                session_headers(request.headers),
                request.headers.get("Content-Encoding", "identity").lower(),
            )
            self.sink("arrived", ex)
        url = target_url(self.upstream_url, request.path, request.query_string)
        try:
            return await self._relay(request, url, body, ex)
        finally:
            if ex is not None:
                if ex.t_end is None:
                    ex.end("cancelled", "the client went away")
                self.sink("ended", ex)

    async def _relay(self, request, url, body, ex: Exchange | None) -> web.StreamResponse:
        headers, session = list(request.headers.items()), request.app[CLIENT_KEY]
        resp: web.StreamResponse | None = None
        try:
            async with upstream.forward(session, request.method, url, headers, body) as up:
                resp = await self._open(request, up, ex)
                async for data in up.body:
                    if ex is not None:
                        ex.take(data)
                    if not await _write(resp, data):
                        return self._left(ex, resp)
                if ex is not None:
                    ex.end("ok" if ex.status == 200 else "http_error")
                # every byte of the body was passed on: a client gone before its end (an SDK
                # closes on [DONE]) had the whole answer, and the request stays in the trace
                await _write(resp, None)
        except (WireError, OSError) as exc:
            return self._failed(ex, exc, request, resp)
        return resp

    @staticmethod
    def _left(ex: Exchange | None, resp: web.StreamResponse) -> web.StreamResponse:
        if ex is not None:
            ex.outcome, ex.error = "cancelled", "the client went away"
            ex.end("cancelled")
        return resp

    async def _open(self, request, up: upstream.Upstream, ex: Exchange | None):
        resp = web.StreamResponse(status=up.status, reason=up.reason)
        for name, value in up.headers:
            if name.lower() == "content-length":
                resp.content_length = int(value)
            else:
                resp.headers.add(name, value)
        if ex is not None:
            ex.status = up.status
            ex.content_type = resp.headers.get("Content-Type", "").lower()
            ex.reply_encoding = resp.headers.get("Content-Encoding", "identity").lower()
        await resp.prepare(request)
        return resp

    def _failed(self, ex, exc: BaseException, request, resp) -> web.StreamResponse:
        """The upstream failed: a 502 if nothing was sent yet, else the client's stream is cut
        (the connection closed mid-body, as the upstream's was)."""
        kind = getattr(exc, "error_class", type(exc).__name__)
        why = f"{kind}: {exc}".splitlines()[0][:300]
        if ex is not None:
            ex.end("failed", why)
        if resp is not None:
            if request.transport is not None:
                request.transport.close()
            return resp
        log.warning("upstream request failed: %s", why)
        error = {
            "error": {
                "message": f"harness record: the upstream failed: {why}",
                "type": "upstream_error",
            }
        }
        return web.json_response(error, status=502)


async def _write(resp: web.StreamResponse, data: bytes | None) -> bool:
    """Write a read to the client (None: the end); False when the client has gone."""
    try:
        if data is None:
            await resp.write_eof()
        else:
            await resp.write(data)
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        return False
    return True
