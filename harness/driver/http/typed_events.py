"""The reading loop shared by the streams whose events are told apart by their `type` field
(Anthropic Messages, OpenAI Responses): `StreamDecoder`'s interface, each event to `decode`.

A subclass of `StreamDecoder` so that the target's body reader, typed for it, takes these as
they are; the subclasses write `decode` (one event's output tokens) and `finish`.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from harness.driver.http.apis.openai.decode import StreamDecoder


class TypedEventDecoder(StreamDecoder):
    __slots__ = ()

    def read(self, payloads: list[bytes], t: float) -> int:
        return self._events([parse(p) for p in payloads], payloads, t)

    def _events(self, objs: list, payloads: Iterable[bytes], t: float) -> int:
        tokens = 0
        for obj, payload in zip(objs, payloads, strict=True):
            try:
                tokens += self.decode(payload, obj, t)
            except (AttributeError, TypeError, KeyError):  # JSON of the wrong shape
                shown = payload[:200]
                self._fail(t, "MalformedEvent", f"unexpected event shape: {shown!r}")
            if self.failure is not None:
                break
        if tokens:
            self.started = True
        return tokens

    def kept(self, text: str) -> int:
        """One token of output `text` (kept when the request wants its text)."""
        if self._texts is not None:
            self._texts.append(text)
        return 1


def parse(payload: bytes) -> object:
    """The payload's JSON; None if it does not parse."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None


def error_text(err: object, kind_key: str) -> str:
    """`<kind>: <message>` from an error object whose kind is under `kind_key`."""
    if isinstance(err, dict):
        kind, message = err.get(kind_key), err.get("message")
        text = f"{kind}: {message}" if kind and message else str(message or kind or err)
        return text[:500]
    return str(err)[:500]
