"""The HTTP target: any API of the registry (harness/driver/apis/: OpenAI's chat and
completions, Anthropic's Messages, OpenAI's Responses, Google's Gemini...), streamed, each to
the URL its entry builds.

Requests go out on the wire's own keep-alive pool (wire.py, pool.py: HTTP/1.1, parsed by
httptools as the bytes arrive), sized to the load, through the user's network (network.py:
proxy, trust, client certificate). Each API's body, headers and stream decoder are its request
form (its registry entry's `form`); the router's session headers come from session_headers.py.
Timeouts are enforced by a per-request watchdog (watchdog.py); failures are mapped in
failure.py, the check before the clock starts is preflight.py (its GETs on the one plain client,
client.py), the settings and URLs are config.py. A request sent on a reused connection that the
server closed before any byte of an answer is sent once more on a fresh one (`Resent`); a 307
or 308 is followed as redirects.py allows (`Redirected`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
import warnings
from collections.abc import Callable, Sequence

from harness import __version__
from harness.driver.apis import RequestForm, StreamDecoder, api_named
from harness.driver.http.client import HTTPClient
from harness.driver.http.config import PER_EVENT_USAGE, HTTPTargetConfig, endpoint_url, redact
from harness.driver.http.failure import http_failure, timed_out, wire_failure
from harness.driver.http.network import Network
from harness.driver.http.placing import PlacingSink
from harness.driver.http.pool import Pool
from harness.driver.http.preflight import preflight
from harness.driver.http.redirects import next_hop
from harness.driver.http.session_headers import FAMILIES, session_headers
from harness.driver.http.sse import SSEError, SSEParser
from harness.driver.http.watchdog import Watchdog as _Watchdog  # the name `_Parsing` reads
from harness.driver.http.wire import Endpoint, Response, WireError
from harness.driver.manifest import redact_url
from harness.driver.target import (
    Done,
    Event,
    Failure,
    Redirected,
    RequestSpec,
    Resent,
    Sent,
    Sink,
)
from harness.errors import HarnessWarning
from harness.trace.content import load_hf_token_counter

__all__ = ["HTTPTarget", "HTTPTargetConfig"]

_perf = time.perf_counter


class HTTPTarget:
    name = "openai-http"  # the manifest's target kind, as runs before the rename wrote it

    def __init__(self, config: HTTPTargetConfig) -> None:
        self.api = api_named(config.api)
        unknown = set(config.session_headers) - FAMILIES.keys()
        if unknown:
            raise ValueError(f"unknown session header families: {', '.join(sorted(unknown))}")
        self.config = config
        self.form: RequestForm = self.api.form(config)
        self._session_headers = session_headers(config.session_headers)
        # Records name endpoints without user info or query strings (they may hold secrets).
        self.endpoints: Sequence[str] = tuple(redact_url(e) for e in config.endpoints)
        self._urls = [endpoint_url(e, config.api, model=config.model) for e in config.endpoints]
        self._secrets = config.secrets()
        self.network = Network(config.network)  # the environment's proxy and trust, read once
        self._client: HTTPClient | None = None
        self._pool: Pool | None = None
        self.base_headers = self._make_headers()
        self._wire = [Endpoint(url, self.base_headers, self.network) for url in self._urls]
        if any(ep.tls for ep in self._wire):
            self.network.tls_context()  # the bundle of REQUESTS_CA_BUNDLE & co. read: one line
        self._hops: dict[str, Endpoint] = {}  # where redirects led
        self.served: dict[str, dict] = {}  # endpoint -> what its /models card says it is
        self.context_limits: dict[str, int | None] = {}  # base URL -> max_model_len on /models
        self._count: Callable[[str], int] | None = None  # placing.py's counter, when it applies
        self.probe_tools: list[dict] | None = None  # the run's tools, on the preflight's probe

    def probe_like(self, tools: list[dict] | None) -> None:
        """The preflight's probe carries these tools (the run's first request's), so a server
        that refuses the run's shape (tools, tool_choice, sampling) stops it before the clock."""
        self.probe_tools = tools

    def _make_headers(self) -> dict[str, str]:
        # identity: a compressed stream would only cost CPU on both sides, per chunk
        h = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
            "User-Agent": f"agentic-harness/{__version__}",
        }
        given = {name.lower() for name in (*self.config.headers, *self.form.headers())}
        h = {name: value for name, value in h.items() if name.lower() not in given}
        h.update(self.config.headers)
        h.update(self.form.headers())
        return h

    async def start(self, check: bool = True) -> None:
        c = self.config
        # Streamed requests go over the wire's own pool, bounded by each request's watchdog;
        # the plain GETs (the preflight's /models) by the client's timeout.
        self._pool = Pool(c.max_connections, c.timeouts.connect, self.network)
        self._client = HTTPClient(
            self.network, timeout=c.timeouts.connect, connect_timeout=c.timeouts.connect
        )
        self._say_network()
        if check:
            for i, base in enumerate(self.config.endpoints):
                await preflight(self, i, base)
        self._resolve_usage()

    def _say_network(self) -> None:
        """The run's first screen names the proxy each endpoint goes through, and warns of
        --insecure (the manifest's `target.network` keeps both)."""
        for url, ep in zip(self.endpoints, self._wire, strict=True):
            if ep.proxy is not None:
                print(f"harness: {url} through the proxy {ep.proxy.shown}", file=sys.stderr)
        if self.config.network.insecure:
            warnings.warn(
                "certificates are not verified (--insecure): the endpoint is not authenticated",
                HarnessWarning,
                stacklevel=2,
            )

    def _resolve_usage(self) -> None:
        """`continuous_usage: auto` decided from what the endpoints' /models cards said, and
        the tokenizer that places a multi-token event's tokens where usage is not per event."""
        c = self.config
        if c.continuous_usage == "auto":
            said = [self.served.get(e, {}).get("owned_by") for e in self.endpoints]
            asked = self.api.usage_per_event and all(s in PER_EVENT_USAGE for s in said)
            on = self.api.running_usage or asked
            self.config = c = c.model_copy(update={"continuous_usage": on})
            self.form = self.api.form(c)
        if c.tokenizer is not None and not (c.continuous_usage is True or self.api.running_usage):
            self._count = load_hf_token_counter(c.tokenizer)

    def token_placement(self) -> str:
        """How each event's output tokens are known (the manifest's `token_placement`)."""
        c = self.config
        if c.continuous_usage is True or self.api.running_usage:
            return "usage per event"
        if self._count is not None:
            return f"by text: events counted one token each, the rest placed by their text with {c.tokenizer}"
        return "one token per event (no per-event usage, no tokenizer)"

    def client(self) -> HTTPClient:
        """The plain client (the preflight's GETs), on the same network as the streams."""
        if self._client is None:
            raise RuntimeError("HTTPTarget.start() was not called")
        return self._client

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def describe(self) -> dict:
        c = self.config
        served = [{"endpoint": e, **self.served[e]} for e in self.endpoints if e in self.served]
        return {
            "kind": self.name,
            "model": c.model,
            "api": c.api,
            "header_names": sorted(c.headers),  # values may be secrets
            "authorization": c.api_key is not None,
            "min_tokens": c.send_min_tokens and "min_tokens" not in self.api.not_carried,
            "ignore_eos": c.send_ignore_eos and "ignore_eos" not in self.api.not_carried,
            "continuous_usage": c.continuous_usage,
            "token_placement": self.token_placement(),
            "session_id_field": c.session_id_field,
            "sampling": c.sampling.describe(self.api.not_carried),
            "timeouts": {
                "connect": c.timeouts.connect,
                "ttft": c.timeouts.ttft,
                "idle": c.timeouts.idle,
                "total": c.timeouts.total,
            },
            "max_connections": c.max_connections,
            "network": self.network.describe(),
            "session_headers": list(c.session_headers),
            **{name: getattr(c, name) for name in self.api.options},
            "cache_rules": c.cache_rules.profile(c.model, c.prices),
            # learned at start from each endpoint's /models card: what serves the model
            "served_by": served,
            "simulated": any(s.get("simulated") is True for s in served),
        }

    def body(self, req: RequestSpec) -> dict:
        return self.form.body(req)

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        """The request's JSON body, in pieces to send in order (`b"".join` gives the JSON)."""
        return self.form.encode(req)

    async def stream(self, req: RequestSpec, sink: Sink) -> None:
        if self._count is not None:
            sink = PlacingSink(sink, self._count)
        if self._pool is None:
            raise RuntimeError("HTTPTarget.start() was not called")
        body = req.payload if req.payload is not None else self.encode(req)
        wd = _Watchdog(asyncio.get_running_loop(), _perf(), self.config.timeouts)
        try:
            end = await self._exchange(self._pool, req, body, wd, sink)
        finally:
            wd.cancel()
        for ev in end:
            if isinstance(ev, Failure):  # the kept body too: a server may quote the key
                kept = None if ev.body is None else redact(ev.body, self._secrets)
                ev = dataclasses.replace(ev, message=redact(ev.message, self._secrets), body=kept)
            sink.event(ev)

    async def _exchange(
        self,
        pool: Pool,
        req: RequestSpec,
        body: Sequence[bytes | memoryview],
        wd: _Watchdog,
        sink: Sink,
    ) -> list[Event]:
        """Send `body`, read the answer into `sink`: the events that end the request."""
        head = self._head(req, sum(len(piece) for piece in body))
        if head is None:
            why = "a session header or the request id holds a line break"
            return [Failure(_perf(), "error", "BadHeader", why)]
        ep, hops = self._wire[req.endpoint], 0
        while True:
            dec = self.form.decoder(req.want_text or self._count is not None)
            parsing = _Parsing(SSEParser(self.config.max_event_bytes), dec, wd, sink)
            got = await self._send(pool, ep, head, body, wd, sink, parsing)
            if isinstance(got, Failure):
                return [got]
            resp = got
            try:
                where = next_hop(
                    resp.status, resp.headers, ep.url, "POST", self.network.settings, hops
                )
            except WireError as err:
                return [http_failure(resp, str(err))]
            if where is None or dec.failure is not None or wd.reason is not None:
                break
            hops += 1
            ep = self._endpoint_at(where)
            sink.event(Redirected(_perf(), resp.status, redact_url(where)))
        return [
            self._via(ev, ep) if isinstance(ev, Failure) else ev
            for ev in self._ending(req, resp, dec, parsing, wd)
        ]

    async def _send(
        self,
        pool: Pool,
        ep: Endpoint,
        head: bytes,
        body: Sequence[bytes | memoryview],
        wd: _Watchdog,
        sink: Sink,
        parsing: _Parsing,
    ) -> Response | Failure:
        """One send and its answer; once more on a fresh connection when the reused one it
        went on closed before any byte came back (the server never read it)."""
        for fresh in (False, True):
            try:  # a free connection, or a new one, by the TTFT or total deadline
                conn = await wd.connecting(pool.acquire(ep, fresh))
            except WireError as err:
                return self._via(wire_failure(err), ep)
            except TimeoutError:  # the watchdog's: its deadline says which
                waited = WireError("ConnectTimeout", "no connection before the request's deadline")
                return timed_out(wd, self.config.timeouts) or wire_failure(waited)
            try:
                wd.conn = conn
                resp = conn.send(ep.head + head, body, parsing.take)
                sink.event(Sent(resp.t_write))
                await resp.ended
            finally:
                wd.conn = None  # the watchdog holds the connection, whose consumer holds it
                pool.release(conn)  # kept only when the response ended whole, keep-alive
            cut = resp.error
            stale = resp.reused and not resp.answered and cut is not None and wd.reason is None
            if fresh or not stale or pool.closed or cut is None:
                return resp
            sink.event(Resent(_perf(), f"{cut.error_class}: {cut}"))
        raise AssertionError("unreachable")

    def _endpoint_at(self, url: str) -> Endpoint:
        ep = self._hops.get(url)
        if ep is None:
            if len(self._hops) >= 64:  # a server redirecting each request somewhere new
                self._hops.clear()
            ep = self._hops[url] = Endpoint(url, self.base_headers, self.network)
        return ep

    def _via(self, failure: Failure, ep: Endpoint) -> Failure:
        """A failure through a proxy names it (a refusal or a DNS error is the proxy's)."""
        if ep.proxy is None or "proxy" in failure.message:
            return failure
        return dataclasses.replace(
            failure, message=f"{failure.message} (through the proxy {ep.proxy.shown})"
        )

    def _ending(
        self, req: RequestSpec, resp: Response, dec: StreamDecoder, parsing: _Parsing, wd: _Watchdog
    ) -> list[Event]:
        """The events that end the request, from its last response."""
        if dec.failure is not None:
            return [dec.failure]
        verdict = timed_out(wd, self.config.timeouts)
        if verdict is not None:
            return [verdict]
        if resp.status not in (0, 200):
            return [http_failure(resp)]
        if resp.error is not None:
            return [wire_failure(resp.error)]
        if resp.status == 200 and resp.content_type == "application/json":
            # a server that ignored "stream": true
            text = bytes(resp.body[:300]).decode("utf-8", "replace")
            why = f"a 200 JSON reply, not an event stream (is streaming on?): {text}"
            return [Failure(_perf(), "error", "NotEventStream", why)]
        parsing.take(b"", _perf(), last=True)  # a last event without its blank line
        if dec.failure is not None:
            return [dec.failure]
        end = dec.finish(_perf())
        if isinstance(end[-1], Done):
            self.form.finished(req, dec)
        return end

    def _head(self, req: RequestSpec, length: int) -> bytes | None:
        """The request's own header lines and the blank line (None: a value breaks a line)."""
        lines = [f"{k}: {v}\r\n" for k, v in self._session_headers(req).items()]
        lines.append(f"X-Harness-Request-ID: {req.request_id}\r\nContent-Length: {length}\r\n\r\n")
        text = "".join(lines)
        breaks = len(lines) + 2  # one a session header, three in the last piece
        if text.count("\n") != breaks or text.count("\r") != breaks:
            return None
        return text.encode()


class _Parsing:
    """One response body's arrivals, parsed into the target's sink as they come."""

    __slots__ = ("parser", "dec", "wd", "sink")

    def __init__(self, parser: SSEParser, dec: StreamDecoder, wd: _Watchdog, sink: Sink) -> None:
        self.parser, self.dec, self.wd, self.sink = parser, dec, wd, sink

    def take(self, piece: bytes, t: float, last: bool = False) -> bool:
        """The output of one arrival into the sink; True once the stream failed."""
        self.wd.last, dec = t, self.dec
        try:
            events = self.parser.close() if last else self.parser.feed(piece)
        except SSEError as exc:
            dec.failure = Failure(t, "error", "OversizedEvent", str(exc))
            return True
        tokens = dec.read(events, t)
        if tokens:
            if not self.wd.first:
                self.wd.started()
            self.sink.chunk(t, tokens, dec.text())
        return dec.failure is not None
