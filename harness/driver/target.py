"""The Target protocol: how the driver sends one request, whatever serves it.

A target streams one `RequestSpec` into a `Sink`, in this order:

    sink.event(Sent)?     (when the request's bytes were handed to the socket)
    sink.event(Resent | Redirected)*  (sent again: on a fresh connection, or where a redirect
                          said; each followed by its own Sent)
    sink.chunk(...)*      (each piece of output; the first one is the first token)
    sink.event(Usage)?    (what the server reported: prompt, completion and cached tokens)
    sink.event(Done | Failure)   (exactly one, always last; the target returns after it)

Chunks are the hot path (one per network read): a call with the numbers, no object, and no hop
through an async generator, which cost the driver more per token than the raw bytes' reading.

Times are `time.perf_counter()` values taken when the bytes arrived; the recorder turns them
into run-clock seconds. A target never raises for a failed request: it reports `Failure` with
`status` "error" or "timeout" and a short error class ("HTTP500", "IdleTimeout",
"MalformedEvent", ...). Cancellation (`asyncio.CancelledError`) is the one thing that escapes;
the driver records it as `cancelled`.

Implementations: `harness.driver.http.HTTPTarget` (any server speaking an API of its registry)
and `harness.driver.engine_target.EngineTarget` (the reference engine, in-process).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pydantic import Field

from harness.yamlconf import Strict

if TYPE_CHECKING:
    import numpy as np

FailureStatus = Literal["error", "timeout"]


@dataclass(slots=True, kw_only=True)
class RequestSpec:
    """What to send: one turn of one session, fully materialized; built by name and never
    changed after (a changed request is a new one, `dataclasses.replace`), but for `payload`,
    which the replay sets once, from the spec itself, before anything else sees it. Not frozen:
    a frozen dataclass sets each field through `object.__setattr__`, a cost on every request."""

    request_id: str
    session_id: str
    sticky_key: str  # sent as X-Session-ID; a subagent that follows its parent uses the root's id
    endpoint: int  # index into Target.endpoints, chosen by the router
    max_tokens: int  # forced output length (output_tokens of the turn)
    prompt_tokens: int  # expected prompt length from the trace
    messages: list[dict] | None = None  # chat API
    prompt: Sequence[int] | np.ndarray | str | None = None  # completions: token ids or text
    prompt_json: bytes | memoryview | None = None  # token ids as JSON array items (b"1,2,3")
    want_text: bool = False  # fill the chunks' text (live history needs the reply); else ""
    payload: Sequence[bytes | memoryview] | None = None  # the body, when the target has `encode`
    tools: list[dict] | None = None  # OpenAI chat tool schemas
    parent_id: str | None = None  # a subagent's parent session (http/session_headers.py)
    root_id: str | None = None  # the root of a subagent's family


@dataclass(slots=True)
class Sent:
    """The request's bytes were handed to the socket at `t`: its TTFT counts from here.

    Without it the driver's own stamp, taken just before `stream()` is called, stands: that one
    also holds the wait for a pooled connection, the connect and the event loop's turn before
    the write, which are the client's delays, not the server's.
    """

    t: float


@dataclass(slots=True)
class Resent:
    """The request went out again on a fresh connection: the reused one it was sent on closed
    before any byte of an answer came (a server closing an idle connection as it arrived)."""

    t: float
    why: str


@dataclass(slots=True)
class Redirected:
    """The server redirected the request (307, 308) and it was sent again to `url`."""

    t: float
    status: int
    url: str  # without user info or query string


@dataclass(slots=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None  # usage.prompt_tokens_details.cached_tokens; None if absent
    # ... split by tier ("device", "cpu", "disk", "remote"), where the server says; else None
    cached_tiers: dict[str, int] | None = None
    spec: SpecCounts | None = None  # the request's speculative decoding, where the server says
    # Anthropic's cache writes: cache_creation_input_tokens, and its split by TTL
    # (cache_creation.ephemeral_5m_input_tokens, ephemeral_1h_input_tokens); None where absent
    cache_writes: tuple[int | None, int | None, int | None] | None = None


@dataclass(slots=True)
class SpecCounts:
    """One request's speculative decoding as its server reported it (vLLM's per-request form)."""

    drafts: int  # verify steps
    draft_tokens: int  # tokens drafted
    accepted_tokens: int  # draft tokens accepted (the bonus token of each step excluded)


@dataclass(slots=True)
class Done:
    t: float


@dataclass(slots=True)
class Failure:
    t: float
    status: FailureStatus
    error_class: str
    message: str
    retry_after_s: float | None = None  # the server's Retry-After, when it sent one
    body: str | None = None  # the server's whole error body, when `message` shortened it


Event = Sent | Usage | Done | Failure | Resent | Redirected


class Sink(Protocol):
    """Where a target reports one request (`harness.driver.recorder.RecordSink` fills a record)."""

    def chunk(self, t: float, tokens: int, text: str) -> None:
        """Output that arrived at `t` (events read together form one chunk): `tokens` output
        tokens (exact with usage per event; else one per event with text); `text` is filled
        when `RequestSpec.want_text`, else it may be ""."""

    def event(self, ev: Event) -> None: ...


@runtime_checkable
class Target(Protocol):
    name: str  # e.g. "openai-http", "engine"
    endpoints: Sequence[str]  # what records name as `endpoint`; RequestSpec.endpoint indexes it

    async def start(self) -> None:
        """Open connections / start the engine. Raise `TargetError` if it cannot work at all."""

    async def close(self) -> None: ...

    async def stream(self, req: RequestSpec, sink: Sink) -> None:
        """Send `req`, reporting it into `sink` in the order above."""

    # Optional: `encode(req) -> pieces`, the request's wire body (buffers to send in order). The
    # driver calls it before it stamps `t_sent` and passes the result as `req.payload`, so the
    # body's encoding is not counted in the request's TTFT even by a target that reports no `Sent`.

    def describe(self) -> dict:
        """For the manifest: model, api, options. Never secrets."""
        ...


class Timeouts(Strict):
    """Seconds, the scenario's `target.timeouts`. `ttft` counts from send to the first output
    token (headers included). The files' keys end in `_s`; the code reads `.connect` etc."""

    connect: float = Field(
        30.0, gt=0, alias="connect_s", description="seconds allowed to open a connection"
    )
    ttft: float = Field(
        600.0,
        gt=0,
        alias="ttft_s",
        description="seconds allowed from send to the first output token",
    )
    idle: float = Field(
        120.0, gt=0, alias="idle_s", description="seconds allowed between reads once output started"
    )
    total: float = Field(
        600.0, gt=0, alias="total_s", description="seconds allowed for a whole request"
    )
