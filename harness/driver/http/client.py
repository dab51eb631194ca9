"""The harness's one HTTP client for plain requests: the preflight's GET of /models, the
/metrics scrape, `harness probe`, and any other caller (a capture proxy's upstream side): the
same wire, proxy, trust, redirects and keep-alive as the HTTP target's streamed requests.

    async with HTTPClient(Network(NetworkSettings())) as http:
        resp = await http.request("GET", "http://host:8000/metrics")
        text = (await resp.read()).decode()        # or: async for piece in resp: ...

`request` returns once the final response's head has come (redirects followed, each hop in
`resp.redirects`); its body streams as it arrives. A failure on the wire is a `WireError`
(`error_class` and one line); an error status is a response like any other.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

from harness import __version__
from harness.driver.endpoint import shown
from harness.driver.http.network import Network
from harness.driver.http.pool import Pool
from harness.driver.http.redirects import next_hop
from harness.driver.http.wire import Connection, Endpoint, Response, WireError

DEFAULT_HEADERS = {"User-Agent": f"agentic-harness/{__version__}", "Accept-Encoding": "identity"}


class HTTPClient:
    """Requests over one pool of `limit` connections, each within `timeout` seconds (connect,
    head and body; None: the caller bounds the body)."""

    def __init__(
        self,
        network: Network,
        *,
        timeout: float | None = 30.0,
        connect_timeout: float = 30.0,
        limit: int = 8,
    ) -> None:
        self.network = network
        self.timeout = timeout
        self._pool = Pool(limit, connect_timeout, network)

    async def __aenter__(self) -> HTTPClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.close()

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        follow: bool = True,
        *,
        raw: bool = False,
    ) -> ClientResponse:
        """`method url` with `headers` and `body`; the response once its head has come. Every
        header is sent as given (Content-Length is the client's). `follow=False` hands a
        redirect back as it came (a proxy passing it on); `raw` does that and leaves the body
        as it came too, in its content coding (a proxy forwarding it byte for byte)."""
        sent = {**DEFAULT_HEADERS, **(headers or {})}
        hops: list[str] = []
        while True:
            resp = await self._once(method, url, sent, body, raw)
            if raw or not follow:
                return resp
            try:
                target = next_hop(
                    resp.status, resp.headers, url, method, self.network.settings, len(hops)
                )
            except WireError:
                resp.close()
                raise
            if target is None:
                resp.redirects = hops
                return resp
            resp.close()  # its body unread: the connection goes
            hops.append(f"{resp.status} {target}")
            url = target

    async def get(self, url: str, headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        """A GET's status and whole body, within the client's timeout."""
        try:
            async with asyncio.timeout(self.timeout):
                resp = await self.request("GET", url, headers)
                try:
                    return resp.status, await resp.read()
                finally:
                    resp.close()
        except TimeoutError:
            raise WireError(
                "TotalTimeout", f"GET {shown(url)}: no whole answer within {self.timeout}s"
            ) from None

    async def _once(
        self, method: str, url: str, headers: dict[str, str], body: bytes, raw: bool = False
    ) -> ClientResponse:
        """One exchange; once more on a fresh connection when the reused one it went on closed
        before any byte came back (the server never read it), as the HTTP target does."""
        sent = {k: v for k, v in headers.items() if k.lower() != "content-length"}
        if body or method not in ("GET", "HEAD"):
            sent["Content-Length"] = str(len(body))
        ep = Endpoint(url, sent, self.network, method)
        out = await self._attempt(ep, url, body, raw, fresh=False)
        if out is None:
            out = await self._attempt(ep, url, body, raw, fresh=True)
        assert out is not None  # a fresh connection is never stale
        return out

    async def _attempt(
        self, ep: Endpoint, url: str, body: bytes, raw: bool, *, fresh: bool
    ) -> ClientResponse | None:
        """The response once its head came; None when a reused connection closed unanswered."""
        try:
            async with asyncio.timeout(self.timeout):
                conn = await self._pool.acquire(ep, fresh)
        except TimeoutError:
            raise WireError("ConnectTimeout", f"no connection to {ep.where} in time") from None
        out = ClientResponse(self._pool, conn, url)
        out.start(conn.send(ep.head + b"\r\n", (body,), out.feed, every_body=True, raw=raw))
        try:
            async with asyncio.timeout(self.timeout):
                await out.head()
        except TimeoutError:
            out.close()
            raise WireError(
                "TTFTTimeout", f"no answer from {ep.where} within {self.timeout}s"
            ) from None
        except WireError:
            out.close()
            if not fresh and out.stale:
                return None
            raise
        except BaseException:
            out.close()
            raise
        return out


class ClientResponse:
    """A response as it arrives: `status`, `reason`, `headers` (lower-case names), `url` (the
    last hop's), `redirects`; the body by `read()` or `async for`. `close()` lets the
    connection go (back to the pool when the body was read whole)."""

    def __init__(self, pool: Pool, conn: Connection, url: str) -> None:
        self._pool, self._conn = pool, conn
        self.url = url
        self.redirects: list[str] = []
        self._pieces: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._resp: Response | None = None
        self._released = False

    def start(self, resp: Response) -> None:
        self._resp = resp
        resp.head = asyncio.get_running_loop().create_future()
        resp.ended.add_done_callback(self._ended)

    def feed(self, piece: bytes, t: float) -> bool:
        self._pieces.put_nowait(piece)
        return False

    def _ended(self, _: asyncio.Future) -> None:
        self._pieces.put_nowait(None)
        self.close(keep=True)

    async def head(self) -> None:
        resp = self._resp
        assert resp is not None and resp.head is not None
        await resp.head
        if resp.status == 0:
            self.close()
            raise resp.error or WireError("ConnectionClosed", "the server sent no answer")

    @property
    def stale(self) -> bool:
        """Sent on a reused connection that closed before any byte came back."""
        resp = self._resp
        return resp is not None and resp.reused and not resp.answered

    @property
    def status(self) -> int:
        assert self._resp is not None
        return self._resp.status

    @property
    def reason(self) -> str:
        assert self._resp is not None
        return self._resp.reason

    @property
    def headers(self) -> dict[str, str]:
        assert self._resp is not None
        return self._resp.headers

    @property
    def error(self) -> WireError | None:
        """Why the body ended early (a cut connection); None when it ended whole."""
        assert self._resp is not None
        return self._resp.error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (piece := await self._pieces.get()) is not None:
            yield piece

    async def read(self, limit: int = 64 * 1024 * 1024) -> bytes:
        """The whole body (a WireError if it ended early or passed `limit` bytes)."""
        out = bytearray()
        async for piece in self:
            out += piece
            if len(out) > limit:
                self.close()
                raise WireError("BadResponse", f"a body over {limit} bytes from {self.url}")
        if self.error is not None:
            raise self.error
        return bytes(out)

    def close(self, keep: bool = False) -> None:
        """Let the connection go: kept for reuse only once the response has ended whole."""
        if self._released:
            return
        self._released = True
        resp = self._resp
        if not keep or resp is None or not resp.ended.done():
            self._conn.cancel()
        self._pool.release(self._conn)
