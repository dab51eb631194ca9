"""Decoding OpenAI streaming payloads (chat and completions) into target events.

A request counts as complete only when its stream carried `[DONE]` and a usage object; an
error object or an unparseable event fails it at once (its numbers cannot be trusted).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import aiohttp
import orjson

from harness.driver.target import Done, Event, Failure, Usage

_ERROR_BODY_BYTES = 64 * 1024
_loads = orjson.loads
_JSONError = orjson.JSONDecodeError


class StreamDecoder:
    """Counts the output tokens of each read's payloads: one chunk per read.

    Events that arrive in one read share one arrival time, so they form one chunk with their
    summed tokens: splitting them would only add zero-length gaps to the inter-token latency.
    """

    __slots__ = ("started", "failure", "done", "usage", "sglext", "_completion", "_texts")

    def __init__(self, keep_text: bool = False) -> None:
        self.started = False  # an output chunk has been seen
        self.failure: Failure | None = None
        self.done = False
        self.usage: dict | None = None
        self.sglext: dict | None = None  # SGLang's extension chunk (cached tokens by tier)
        self._completion = 0  # cumulative completion tokens (continuous usage stats)
        self._texts: list[str] | None = [] if keep_text else None

    def read(self, payloads: list[bytes], t: float) -> int:
        """The output tokens of one read's events; on a bad event `failure` is set and decoding
        stops. The text of the tokens counted so far (when kept) is `text()`."""
        return self._count([_parse(p) for p in payloads], payloads, t)

    def read_array(self, array: bytes, n: int, t: float) -> int | None:
        """`read` for `n` events whose payloads come joined as one JSON array (`SSEParser.
        feed_array`): one parse for all. None, with nothing read, unless the array holds `n`
        JSON objects: then the caller `read`s the events one by one, for the exact error.

        (Events that are not JSON alone could pass here only if, joined by commas, they made
        exactly `n` objects: no server sends that by accident.)"""
        done = array.endswith(b",[DONE]]")  # the stream's last read: usage, then [DONE]
        if done:
            array, n = array[:-8] + b"]", n - 1
        objs = _parse(array)
        if type(objs) is not list or len(objs) != n or {type(obj) for obj in objs} != {dict}:
            return None
        tokens = self._count(objs, itertools.repeat(b""), t)
        self.done = self.done or (done and self.failure is None)
        return tokens

    def _count(self, objs: list, payloads: Iterable[bytes], t: float) -> int:
        """Output tokens of parsed events (None: did not parse) and their payloads."""
        tokens, texts = 0, self._texts
        for obj, payload in zip(objs, payloads, strict=False):  # payloads may repeat b""
            try:
                # Fast path, inlined (it runs for every token): a plain content delta.
                if type(obj) is dict and obj.get("usage") is None and obj.get("error") is None:
                    choices = obj.get("choices")
                    if choices:
                        choice = choices[0]
                        delta = choice.get("delta")
                        text = choice.get("text") if delta is None else delta.get("content")
                        if text:
                            tokens += 1
                            if texts is not None:
                                texts.append(text)
                            continue
                tokens += self.decode(payload, obj, t)
            except (AttributeError, TypeError, IndexError, KeyError):  # JSON of the wrong shape
                shown = (payload or orjson.dumps(obj))[:200]
                self._fail(t, "MalformedEvent", f"unexpected event shape: {shown!r}")
            if self.failure is not None:
                break
        if tokens:
            self.started = True
        return tokens

    def text(self) -> str:
        """The text of the tokens read since the last call ("" unless `keep_text`)."""
        texts = self._texts
        if not texts:
            return ""
        text = "".join(texts)
        texts.clear()
        return text

    def decode(self, payload: bytes, obj: object, t: float) -> int:
        """Output tokens of any event; `obj` is the parsed payload, or None if it did not parse."""
        if obj is None:
            if payload.strip() == b"[DONE]":
                self.done = True
                return 0
            return self._fail(t, "MalformedEvent", f"unparseable event: {payload[:200]!r}")
        if type(obj) is not dict:
            return self._fail(t, "MalformedEvent", f"event is not a JSON object: {payload[:200]!r}")
        if obj.get("error") is not None:
            return self._fail(t, "StreamError", _error_text(obj["error"]))
        choices = obj.get("choices")
        text = _choice_text(choices[0]) if choices else ""
        tokens = 1 if text else 0
        if obj.get("sglext"):
            self.sglext = obj["sglext"]
        usage = obj.get("usage")
        if usage:
            self.usage = usage
            so_far = usage.get("completion_tokens")
            if choices and type(so_far) is int:  # continuous usage stats: exact tokens per event
                tokens, self._completion = max(0, so_far - self._completion), so_far
        if tokens and self._texts is not None:
            self._texts.append(text)  # a token whose text is held back (partial UTF-8) adds ""
        return tokens

    def _fail(self, t: float, error_class: str, message: str) -> int:
        self.failure = Failure(t, "error", error_class, message)
        return 0

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
                    cached_tiers(details, self.sglext),
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


TIERS = ("device", "cpu", "disk", "remote")
_SGLANG_DISK_BACKENDS = ("file",)  # SGLang's HiCacheFile: local files; other L3 backends are remote


def cached_tiers(details: dict, sglext: dict | None) -> dict[str, int] | None:
    """Cached tokens by tier: the reference engine's `cached_tokens_<tier>` fields, else SGLang's
    `cached_tokens_details` (device, host, storage with its backend; in `sglext`, or beside
    cached_tokens); None when the server gives no split (vLLM splits only in /metrics)."""
    ours = {t: details.get(f"cached_tokens_{t}") for t in TIERS}
    if any(type(v) is int for v in ours.values()):
        return {t: _count_of(v) for t, v in ours.items()}
    sg = (sglext or {}).get("cached_tokens_details") or details.get("cached_tokens_details")
    if not isinstance(sg, dict):
        return None
    counts = {k: _count_of(sg.get(k)) for k in ("device", "host", "storage")}
    disk = sg.get("storage_backend") in _SGLANG_DISK_BACKENDS
    storage = counts["storage"]
    return {
        "device": counts["device"],
        "cpu": counts["host"],
        "disk": storage if disk else 0,
        "remote": 0 if disk else storage,
    }


def _count_of(value: object) -> int:
    return value if type(value) is int else 0


def _parse(payload: bytes) -> object:
    """The payload's JSON; None if it does not parse."""
    try:
        return _loads(payload)
    except _JSONError:
        return None


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
