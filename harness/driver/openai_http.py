"""The OpenAI-compatible HTTP target: `/v1/chat/completions` and `/v1/completions`, streamed.

One `aiohttp.ClientSession` per run, its connector sized to the load (aiohttp's default silently
caps at 100 connections). Timeouts are enforced by a per-request watchdog that re-arms lazily
(one timer per request, not per chunk) and closes the response when a deadline passes, so the
stream loop never sees a task cancellation it did not ask for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import email.utils
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import aiohttp
import numpy as np
import orjson

from harness.driver.aiohttp_internals import use_protocol
from harness.driver.manifest import redact_url
from harness.driver.sse import DEFAULT_MAX_EVENT_BYTES, SSEError, SSEParser
from harness.driver.stream_decode import StreamDecoder, http_error_message
from harness.driver.target import Event, Failure, RequestSpec, Sent, Sink, Timeouts
from harness.driver.wire import BodyReader, StampingProtocol, WireBody
from harness.errors import DependencyError, TargetError

_perf = time.perf_counter


@dataclass(frozen=True)
class HTTPTargetConfig:
    endpoints: tuple[str, ...]  # base URLs: http://host:port or http://host:port/v1
    model: str
    api: str = "completions"  # "chat" | "completions"
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = ()
    min_tokens: bool = True  # send min_tokens = max_tokens (vLLM, SGLang)
    ignore_eos: bool = True
    continuous_usage: bool = False  # vLLM stream_options.continuous_usage_stats
    session_id_field: str | None = None  # also put the session id in the body under this name
    cache_details: bool = False  # SGLang's return_cached_tokens_details (cached tokens by tier)
    timeouts: Timeouts = Timeouts()
    max_connections: int = 256
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    preflight: bool = False  # at start: the model on /models, one probe request answered

    def secrets(self) -> tuple[str, ...]:
        """Values never to write: the key, header values, a URL's password and query values."""
        found = [self.api_key or "", *(v for _, v in self.headers)]
        for e in self.endpoints:
            parts = urlsplit(e)
            found += [parts.password or "", *(v for _, v in parse_qsl(parts.query))]
        return tuple(sorted({f for f in found if len(f) >= 4}, key=len, reverse=True))


def endpoint_url(base: str, api: str, resource: str | None = None) -> str:
    """The URL of `api`'s path (or `resource`, e.g. "/models") under `base`, with or without
    /v1, its query string kept (a key some gateways take there)."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    leaf = resource or ("/chat/completions" if api == "chat" else "/completions")
    if path.endswith(("/chat/completions", "/completions")):
        if resource is None:
            return base
        path = path.rsplit("/chat/completions", 1)[0].rsplit("/completions", 1)[0]
    path = (path if path.endswith("/v1") else path + "/v1") + leaf
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret (and any bearer token) replaced by <redacted>."""
    for secret in secrets:
        text = text.replace(secret, "<redacted>")
    return _BEARER.sub(r"\1<redacted>", text) if "earer" in text else text


_BEARER = re.compile(r"([Bb]earer\s+)[^\s\"',;}]+")


class _Watchdog:
    """Closes the response once the TTFT, idle or total deadline has passed."""

    __slots__ = ("_loop", "_handle", "t0", "last", "first", "reason", "resp", "reader", "_tm")

    def __init__(self, loop: asyncio.AbstractEventLoop, t0: float, tm: Timeouts) -> None:
        self._loop, self._tm = loop, tm
        self.t0 = self.last = t0
        self.first = False
        self.reason: str | None = None
        self.resp: aiohttp.ClientResponse | None = None
        self.reader: BodyReader | None = None
        self._handle = loop.call_later(min(tm.ttft, tm.total), self._check)

    def _deadline(self) -> tuple[float, str]:
        d, why = (
            (self.last + self._tm.idle, "IdleTimeout")
            if self.first
            else (self.t0 + self._tm.ttft, "TTFTTimeout")
        )
        total = self.t0 + self._tm.total
        return (total, "TotalTimeout") if total <= d else (d, why)

    def _check(self) -> None:
        deadline, why = self._deadline()
        now = _perf()
        if now < deadline - 1e-4:
            self._handle = self._loop.call_later(deadline - now, self._check)
            return
        self.reason = why
        if self.resp is not None:
            self.resp.close()
        if self.reader is not None:
            self.reader.stop()

    def started(self) -> None:
        """The first token came: from now the idle deadline holds, so the timer is re-armed."""
        self.first = True
        self._handle.cancel()
        self._handle = self._loop.call_later(min(self._tm.idle, self._tm.total), self._check)

    def cancel(self) -> None:
        self._handle.cancel()


class OpenAIHTTPTarget:
    name = "openai-http"

    def __init__(self, config: HTTPTargetConfig) -> None:
        if config.api not in ("chat", "completions"):
            raise ValueError(f"api must be 'chat' or 'completions', got {config.api!r}")
        self.config = config
        # Records name endpoints without user info or query strings (they may hold secrets).
        self.endpoints: Sequence[str] = tuple(redact_url(e) for e in config.endpoints)
        self._urls = [endpoint_url(e, config.api) for e in config.endpoints]
        self._secrets = config.secrets()
        self._session: aiohttp.ClientSession | None = None
        self._base_headers = self._make_headers()

    def _make_headers(self) -> dict[str, str]:
        # identity: a compressed stream would only cost CPU on both sides, per chunk
        h = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        h.update(self.config.headers)
        if self.config.api_key:
            h["Authorization"] = f"Bearer {self.config.api_key}"
        return h

    async def start(self, check: bool = True) -> None:
        c = self.config
        tm = c.timeouts
        connector = aiohttp.TCPConnector(
            limit=c.max_connections, limit_per_host=0, ttl_dns_cache=300
        )
        try:
            use_protocol(connector, StampingProtocol)
        except DependencyError:  # aiohttp's internals moved: no run, rather than untimed arrivals
            await connector.close()
            raise
        # No sock_read: aiohttp would re-arm a timer on every read. The watchdog bounds the body,
        # an asyncio.timeout the wait for headers.
        timeout = aiohttp.ClientTimeout(
            total=None, connect=None, sock_connect=tm.connect, sock_read=None
        )
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        if check:
            for i, base in enumerate(self.config.endpoints):
                await self._preflight(i, base)

    async def _preflight(self, i: int, base: str) -> None:
        """Before the clock starts: the endpoint answers at all, serves the model (when it lists
        any on /models), and answers one probe request. A `TargetError` (one line) otherwise."""
        models = await self._models(base)
        c = self.config
        if not c.preflight:
            return
        if models and c.model not in models:
            raise TargetError(
                f"endpoint {redact_url(base)} does not serve model {c.model!r}; it serves: "
                f"{', '.join(sorted(models))}"
            )
        probe = RequestSpec(
            request_id="preflight",
            session_id="preflight",
            sticky_key="preflight",
            endpoint=i,
            max_tokens=1,
            prompt_tokens=4,
            messages=[{"role": "user", "content": "ping"}],
            prompt=[1, 2, 3, 4],
        )
        sink = _ProbeSink()
        await self.stream(probe, sink)
        if sink.failure is not None:
            f = sink.failure
            raise TargetError(
                f"endpoint {redact_url(base)}: the probe request failed ({f.error_class}: "
                f"{f.message}); --no-preflight skips this check"
            )

    async def _models(self, base: str) -> set[str]:
        """The model ids /models lists (empty when it lists none or does not parse)."""
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=self.config.timeouts.connect)
        url = endpoint_url(base, self.config.api, "/models")
        try:
            async with self._session.get(url, timeout=timeout, headers=self._base_headers) as r:
                body = await r.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            message = redact(f"{type(exc).__name__}: {exc}", self._secrets)
            raise TargetError(f"cannot reach endpoint {redact_url(base)}: {message}") from None
        try:
            data = orjson.loads(body).get("data") if r.status == 200 else None
            return {m["id"] for m in data if isinstance(m, dict) and "id" in m} if data else set()
        except (orjson.JSONDecodeError, AttributeError, TypeError):
            return set()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def describe(self) -> dict:
        c = self.config
        return {
            "kind": self.name,
            "model": c.model,
            "api": c.api,
            "header_names": sorted(k for k, _ in c.headers),  # values may be secrets
            "authorization": c.api_key is not None,
            "min_tokens": c.min_tokens,
            "ignore_eos": c.ignore_eos,
            "continuous_usage": c.continuous_usage,
            "session_id_field": c.session_id_field,
            "timeouts": {
                "connect": c.timeouts.connect,
                "ttft": c.timeouts.ttft,
                "idle": c.timeouts.idle,
                "total": c.timeouts.total,
            },
            "max_connections": c.max_connections,
        }

    def body(self, req: RequestSpec) -> dict:
        body = self._fields(req)
        if self.config.api == "chat":
            body["messages"] = req.messages
        else:
            p = req.prompt
            body["prompt"] = p.tolist() if isinstance(p, np.ndarray) else p
        return body

    def _fields(self, req: RequestSpec) -> dict:
        """The body without the prompt."""
        c = self.config
        # servers reject max_tokens 0; a zero-output turn still streams one token
        n = max(1, req.max_tokens)
        body: dict = {"model": c.model, "max_tokens": n, "stream": True}
        body["stream_options"] = (
            {"include_usage": True, "continuous_usage_stats": True}
            if c.continuous_usage
            else {"include_usage": True}
        )
        if c.min_tokens:
            body["min_tokens"] = n
        if c.ignore_eos:
            body["ignore_eos"] = True
        if c.session_id_field:
            body[c.session_id_field] = req.sticky_key
        if c.cache_details:
            body["return_cached_tokens_details"] = True
        return body

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        """The request's JSON body, in pieces to send in order (`b"".join` gives the JSON).

        Token ids already in JSON (`req.prompt_json`, ~7 bytes per id: ~1 MB at 142k tokens)
        are one piece as they are, not encoded again nor copied into one buffer."""
        if req.prompt_json is None or self.config.api == "chat":
            return (orjson.dumps(self.body(req)),)
        rest = orjson.dumps(self._fields(req))
        return (b'{"prompt":[', req.prompt_json, b"]," + rest[1:])

    async def stream(self, req: RequestSpec, sink: Sink) -> None:
        if self._session is None:
            raise RuntimeError("OpenAIHTTPTarget.start() was not called")
        body = WireBody(req.payload if req.payload is not None else self.encode(req))
        wd = _Watchdog(asyncio.get_running_loop(), _perf(), self.config.timeouts)
        try:
            end = await self._exchange(self._session, req, body, wd, sink)
        except SSEError as exc:
            end = [Failure(_perf(), "error", "OversizedEvent", str(exc))]
        except (aiohttp.ClientError, TimeoutError) as exc:
            end = [self._timed_out(wd) or _transport_failure(exc, self.config.timeouts, wd.first)]
        finally:
            wd.cancel()
        for ev in end:
            if isinstance(ev, Failure):
                ev = dataclasses.replace(ev, message=redact(ev.message, self._secrets))
            sink.event(ev)

    async def _exchange(
        self, session: aiohttp.ClientSession, req: RequestSpec, body: WireBody, wd, sink: Sink
    ) -> list[Event]:
        """Send `body`, read the answer into `sink`: the events that end the request."""
        dec, resp = StreamDecoder(keep_text=req.want_text), None
        try:
            async with asyncio.timeout(self.config.timeouts.ttft):  # connect + headers
                resp = await session.post(
                    self._urls[req.endpoint], data=body, headers=self._headers(req)
                )
            wd.resp = resp
            if body.t_write:
                sink.event(Sent(body.t_write))
            if resp.status != 200:
                return [await _http_failure(resp)]
            if resp.content_type == "application/json":  # a server that ignored "stream": true
                text = (await resp.content.read(300)).decode("utf-8", "replace")
                why = f"a 200 JSON reply, not an event stream (is streaming on?): {text}"
                return [Failure(_perf(), "error", "NotEventStream", why)]
            await self._read_body(resp.content, body.proto, wd, dec, sink)
        finally:
            if resp is not None:
                resp.release()  # back to the pool when fully read, closed otherwise
        if dec.failure is not None:
            return [dec.failure]
        timed_out = self._timed_out(wd)
        return [timed_out] if timed_out is not None else dec.finish(_perf())

    def _headers(self, req: RequestSpec) -> dict[str, str]:
        headers = dict(self._base_headers)
        headers["X-Session-ID"] = req.sticky_key
        headers["X-Harness-Request-ID"] = req.request_id  # lets a server log be joined to records
        return headers

    async def _read_body(self, content, proto, wd: _Watchdog, dec: StreamDecoder, sink) -> None:
        """Every event parsed, each arrival's output into `sink` with its own time; stops at a
        bad event (`dec.failure`) or when the watchdog closes the response."""
        parsing = _Parsing(SSEParser(self.config.max_event_bytes), dec, wd, sink)
        wd.reader = reader = BodyReader(proto, content, parsing.take)
        await reader.read()
        if dec.failure is None and wd.reason is None:
            parsing.take(b"", _perf(), last=True)  # a last event without its blank line

    def _timed_out(self, wd: _Watchdog) -> Failure | None:
        """The watchdog's verdict, if it closed the response."""
        if wd.reason is None:
            return None
        message = _timeout_message(wd.reason, self.config.timeouts)
        return Failure(_perf(), "timeout", wd.reason, message)


class _ProbeSink:
    """The preflight's probe: only its failure matters."""

    failure: Failure | None = None

    def chunk(self, t: float, tokens: int, text: str) -> None:
        pass

    def event(self, ev: Event) -> None:
        if isinstance(ev, Failure):
            self.failure = ev


class _Parsing:
    """One response body's arrivals, parsed into the target's sink as they come."""

    __slots__ = ("parser", "dec", "wd", "sink")

    def __init__(self, parser: SSEParser, dec: StreamDecoder, wd: _Watchdog, sink: Sink) -> None:
        self.parser, self.dec, self.wd, self.sink = parser, dec, wd, sink

    def take(self, piece: bytes, t: float, last: bool = False) -> bool:
        """The output of one arrival into the sink; True once the stream failed."""
        self.wd.last, dec = t, self.dec
        tokens = dec.read(self.parser.close(), t) if last else self._tokens(piece, t)
        if tokens:
            if not self.wd.first:
                self.wd.started()
            self.sink.chunk(t, tokens, dec.text())
        return dec.failure is not None

    def _tokens(self, piece: bytes, t: float) -> int:
        """Several whole events parsed as one array when they can be, else one by one."""
        parser, dec = self.parser, self.dec
        # one line, one event (a paced server's every read): `feed`'s fast path is cheapest
        array = None if piece.find(b"\n") == len(piece) - 2 else parser.feed_array(piece)
        tokens = None if array is None else dec.read_array(array[0], array[1], t)
        return dec.read(parser.feed(piece), t) if tokens is None else tokens


async def _http_failure(resp: aiohttp.ClientResponse) -> Failure:
    message = await http_error_message(resp)
    wait = retry_after_s(resp.headers.get("Retry-After"))
    return Failure(_perf(), "error", f"HTTP{resp.status}", message, wait)


def _transport_failure(exc: BaseException, tm: Timeouts, started: bool) -> Failure:
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return Failure(_perf(), "timeout", "ConnectTimeout", f"no connection within {tm.connect}s")
    if isinstance(exc, TimeoutError):  # aiohttp's read timeout, a backstop to the watchdog's
        reason = "IdleTimeout" if started else "TTFTTimeout"
        return Failure(_perf(), "timeout", reason, _timeout_message(reason, tm))
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return Failure(_perf(), "error", "ConnectionClosed", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Failure(_perf(), "error", "ConnectError", str(exc))
    if isinstance(exc, aiohttp.ClientOSError):  # reset while sending, e.g. on a pooled connection
        return Failure(_perf(), "error", "ConnectError", f"{type(exc).__name__}: {exc}")
    return Failure(_perf(), "error", type(exc).__name__, str(exc) or type(exc).__name__)


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header (seconds, or an HTTP date) as seconds from now; None if absent/bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def _timeout_message(reason: str, tm: Timeouts) -> str:
    return {
        "TTFTTimeout": f"no first token within {tm.ttft}s",
        "IdleTimeout": f"no data for {tm.idle}s after output started",
        "TotalTimeout": f"request exceeded {tm.total}s in total",
    }[reason]
