"""Context limits: a request whose prompt plus forced output would not fit the server's
`max_model_len`, and what the driver does with it (the scenario's `target.context_overflow`).

The limit is what the server says: vLLM and SGLang put `max_model_len` on each model entry of
/v1/models (the HTTP target's preflight reads it, `model_len`), the reference engine has it in
its config. A request overflows when `prompt_tokens + max_tokens > max_model_len`, counted in
the trace's tokens (the driver does not tokenize; a server whose chat template adds tokens can
still refuse a request counted as fitting, which `send` attributes by the server's message).

Policies:
- `send` (default): send it anyway; the server's error is recorded as `ContextOverflow`, its
  message kept (`HTTP 400 Bad Request: This model's maximum context length is ...`). vLLM 0.32
  refuses a prompt that alone is too long that way; a prompt that fits with less output it
  serves with `max_tokens` cut to the room left, and then refuses `min_tokens` above that
  ("min_tokens must be less than or equal to max_tokens=2"): any error of a request sent past
  the limit is its answer to the overflow. An error of a request counted as fitting is
  attributed only when its message says so.
- `skip`: not sent; recorded `error` / `ContextOverflowSkipped`, no timings.
- `trim`: cap `max_tokens` at what fits (`max_model_len - prompt_tokens`). The prompt is never
  cut: cutting it from either end would break the prefix chain the benchmark exists to measure,
  and the next turn's prompt (the trace's history) stays what the trace says. A prompt that
  alone fills the context cannot be trimmed that way and is skipped.

The analyzer counts the overflows of the measured requests from the records and the manifest's
`context_limit` (harness/analysis/context_limit.py); past 1 % the run is invalid.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from harness.driver import clock
from harness.driver.target import Event, Failure, RequestSpec, Sink, Target

POLICIES = ("send", "skip", "trim")
SKIPPED = "ContextOverflowSkipped"
REFUSED = "ContextOverflow"
# How vLLM ("This model's maximum context length is N tokens"), SGLang ("is longer than the
# model's context length") and the reference engine word a refusal for length.
_OVERFLOW_MESSAGE = re.compile(r"maximum context length|model's context length|max_model_len", re.I)


def model_len(data: object, model: str) -> int | None:
    """`max_model_len` of `model`'s entry in a /v1/models `data` list (None when not given)."""
    if not isinstance(data, list):
        return None
    for entry in data:
        if isinstance(entry, dict) and entry.get("id") == model:
            value = entry.get("max_model_len")
            return value if isinstance(value, int) and value > 0 else None
    return None


def is_overflow_message(message: str) -> bool:
    """Whether a server's error message says the request did not fit its context."""
    return bool(_OVERFLOW_MESSAGE.search(message))


def overflow(prompt_tokens: int, max_tokens: int, limit: int | None) -> bool:
    """The request would not fit: prompt plus forced output (at least 1) past the limit."""
    return limit is not None and prompt_tokens + max(1, max_tokens) > limit


class ContextLimit:
    """Any Target, with the overflow policy applied per request. Everything else (endpoints,
    `config`, ...) is the wrapped target's."""

    def __init__(self, inner: Target, policy: str = "send") -> None:
        if policy not in POLICIES:
            raise ValueError(f"context_overflow must be one of {POLICIES}, got {policy!r}")
        self.inner, self.policy = inner, policy
        self.name: str = inner.name
        self.endpoints: Sequence[str] = inner.endpoints
        self.limits: list[int | None] = [None] * len(inner.endpoints)
        self.source: str | None = None
        if hasattr(inner, "encode"):  # the replay encodes bodies before the clock when it can
            self.encode = self._encode

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def start(self) -> None:
        await self.inner.start()
        self.limits, self.source = served_limits(self.inner)

    async def close(self) -> None:
        await self.inner.close()

    def describe(self) -> dict:
        return {**self.inner.describe(), "context_overflow": self.policy}

    def manifest(self) -> dict:
        """The manifest's `context_limit`: the policy, each endpoint's limit, where it came from."""
        return {
            "policy": self.policy,
            "max_model_len": dict(zip(self.endpoints, self.limits, strict=True)),
            "source": self.source,
        }

    def _encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        return self.inner.encode(self._fitted(req) or req)  # type: ignore[attr-defined]

    async def stream(self, req: RequestSpec, sink: Sink) -> None:
        limit = self.limits[req.endpoint]
        if not overflow(req.prompt_tokens, req.max_tokens, limit):
            await self.inner.stream(req, _Attributing(sink))  # the server may count otherwise
            return
        fitted = self._fitted(req)
        if self.policy == "skip" or fitted is None:
            sink.event(Failure(clock.now(), "error", SKIPPED, self._why(req, limit)))
            return
        # sent past the limit: whatever error the server answers is its answer to that (vLLM
        # 0.32 caps max_tokens to the room left, then refuses min_tokens above it)
        await self.inner.stream(fitted, _Attributing(sink, always=self.policy == "send"))

    def _fitted(self, req: RequestSpec) -> RequestSpec | None:
        """Under `trim`, the request with its output capped at what fits (None when nothing
        fits); under `send` and `skip`, or when it fits, the request as it is."""
        limit = self.limits[req.endpoint]
        if self.policy != "trim" or not overflow(req.prompt_tokens, req.max_tokens, limit):
            return req
        assert limit is not None
        room = limit - req.prompt_tokens
        return dataclasses.replace(req, max_tokens=room) if room >= 1 else None

    def _why(self, req: RequestSpec, limit: int | None) -> str:
        return (
            f"not sent: prompt {req.prompt_tokens} + max_tokens {max(1, req.max_tokens)} "
            f"> max_model_len {limit} (target.context_overflow: {self.policy})"
        )


class _Attributing:
    """A sink that names a server's refusal for length `ContextOverflow`, keeping its class."""

    __slots__ = ("sink", "chunk", "always")

    def __init__(self, sink: Sink, always: bool = False) -> None:
        self.sink, self.always = sink, always  # always: every error (the request overflowed)
        self.chunk = sink.chunk  # the hot path: straight through, no extra call

    def event(self, ev: Event) -> None:
        if (
            isinstance(ev, Failure)
            and ev.status == "error"
            and (self.always or is_overflow_message(ev.message))
        ):
            # an HTTP failure's message starts with its status ("HTTP 400 Bad Request: ...")
            keep = ev.message if ev.error_class.startswith("HTTP") else None
            ev = Failure(ev.t, ev.status, REFUSED, keep or f"{ev.error_class}: {ev.message}")
        self.sink.event(ev)


def served_limits(target: Target) -> tuple[list[int | None], str | None]:
    """Each endpoint's limit as the started target learned it, and from where."""
    served = getattr(target, "context_limits", None)  # the HTTP target's /v1/models, by base URL
    config = getattr(target, "config", None)
    if served is not None and config is not None:
        limits = [served.get(base) for base in config.endpoints]
        return limits, "/v1/models" if any(v is not None for v in limits) else None
    length = getattr(config, "model_len", None)  # the reference engine's EngineConfig
    if isinstance(length, int):
        return [length] * len(target.endpoints), "engine config"
    return [None] * len(target.endpoints), None


def limit_context(target: Target, policy: str) -> ContextLimit:
    return ContextLimit(target, policy)
