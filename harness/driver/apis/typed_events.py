"""The reading loop shared by the streams whose events are told apart by their `type` field
(Anthropic Messages, OpenAI Responses): each event to `decode`; the subclasses write `decode`
(one event's output tokens) and `finish`.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.driver.apis.stream import StreamDecoder, parse


class TypedEventDecoder(StreamDecoder):
    __slots__ = ()

    def decode(self, payload: bytes, obj: object, t: float) -> int:
        """Output tokens of one event; `obj` is the parsed payload, or None if it did not parse."""
        raise NotImplementedError  # each API's decoder reads its own event types

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


def error_text(err: object, kind_key: str) -> str:
    """`<kind>: <message>` from an error object whose kind is under `kind_key`."""
    if isinstance(err, dict):
        kind, message = err.get(kind_key), err.get("message")
        text = f"{kind}: {message}" if kind and message else str(message or kind or err)
        return text[:500]
    return str(err)[:500]
