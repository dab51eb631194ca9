"""Decoding OpenAI streaming payloads (chat and completions) into target events.

A request counts as complete only when its stream carried `[DONE]` and a usage object; an
error object or an unparseable event fails it at once (its numbers cannot be trusted).
"""

from __future__ import annotations

import aiohttp
import orjson

from harness.driver.target import Chunk, Done, Event, Failure, Usage

_ERROR_BODY_BYTES = 64 * 1024


class StreamDecoder:
    __slots__ = ("started", "failed", "done", "usage", "_completion")

    def __init__(self) -> None:
        self.started = False  # an output chunk has been seen
        self.failed = False
        self.done = False
        self.usage: dict | None = None
        self._completion = 0  # cumulative completion tokens (continuous usage stats)

    def decode(self, payload: bytes, t: float) -> Event | None:
        if payload == b"[DONE]":
            self.done = True
            return None
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return self._fail(t, "MalformedEvent", f"unparseable event: {payload[:200]!r}")
        if type(obj) is not dict:
            return self._fail(t, "MalformedEvent", f"event is not a JSON object: {payload[:200]!r}")
        if "error" in obj and obj["error"] is not None:
            return self._fail(t, "StreamError", _error_text(obj["error"]))
        choices = obj.get("choices")
        text = _choice_text(choices[0]) if choices else ""
        tokens = 1
        usage = obj.get("usage")
        if usage:
            self.usage = usage
            so_far = usage.get("completion_tokens")
            if choices and type(so_far) is int:  # continuous usage stats: exact tokens per chunk
                tokens, self._completion = so_far - self._completion, so_far
                if tokens <= 0:
                    return None
                # a token whose text is held back (partial UTF-8) still counts, with text ""
                self.started = True
                return Chunk(t, tokens, text)
        if not text:
            return None  # role-only first chunk, finish_reason chunk, usage-only chunk
        self.started = True
        return Chunk(t, tokens, text)

    def _fail(self, t: float, error_class: str, message: str) -> Failure:
        self.failed = True
        return Failure(t, "error", error_class, message)

    def finish(self, t: float) -> list[Event]:
        """Events that end a stream which closed without an error."""
        out: list[Event] = []
        if self.usage is not None:
            details = self.usage.get("prompt_tokens_details") or {}
            out.append(
                Usage(
                    self.usage.get("prompt_tokens"),
                    self.usage.get("completion_tokens"),
                    details.get("cached_tokens"),
                )
            )
        if not self.done:
            out.append(Failure(t, "error", "IncompleteStream", "stream ended without [DONE]"))
        elif self.usage is None:
            out.append(
                Failure(
                    t,
                    "error",
                    "MissingUsage",
                    "stream ended without a usage object (stream_options.include_usage)",
                )
            )
        else:
            out.append(Done(t))
        return out


def _choice_text(choice: dict) -> str:
    delta = choice.get("delta")
    if delta is None:
        return choice.get("text") or ""
    text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
    if text:
        return text
    calls = delta.get("tool_calls")
    if calls:
        return "".join((c.get("function") or {}).get("arguments") or "" for c in calls)
    return ""


def _error_text(err) -> str:
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or orjson.dumps(err).decode()
        return str(msg)[:500]
    return str(err)[:500]


async def http_error_message(resp: aiohttp.ClientResponse) -> str:
    """`HTTP 429 Too Many Requests: <the server's message>` from an error response."""
    body = await resp.content.read(_ERROR_BODY_BYTES)
    msg = body.decode("utf-8", "replace").strip()
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        for key in ("error", "message", "detail"):
            if obj.get(key):
                msg = _error_text(obj[key])
                break
    return f"HTTP {resp.status} {resp.reason or ''}".rstrip() + (f": {msg[:500]}" if msg else "")
