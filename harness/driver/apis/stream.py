"""What every API's stream decoder shares: its state, its kept text, its failure.

The HTTP target reads each response through one of these (`RequestForm.decoder`): `read` takes
one network read's SSE payloads and returns their output tokens; `finish` gives the events that
end a stream which closed without an error. An API's decoder subclasses `StreamDecoder`
(apis/openai/decode.py, apis/gemini/decode.py), or `TypedEventDecoder` (apis/typed_events.py)
for streams whose events are told apart by a `type` field.
"""

from __future__ import annotations

import orjson

from harness.driver.target import Event, Failure


class StreamDecoder:
    """One response's decoding state; subclasses write `read` and `finish`."""

    __slots__ = ("started", "failure", "done", "usage", "_texts")

    def __init__(self, keep_text: bool = False) -> None:
        self.started = False  # an output chunk has been seen
        self.failure: Failure | None = None
        self.done = False
        self.usage: dict | None = None
        self._texts: list[str] | None = [] if keep_text else None

    def read(self, payloads: list[bytes], t: float) -> int:
        """The output tokens of one read's events; on a bad event `failure` is set."""
        raise NotImplementedError  # each API's decoder reads its own events

    def finish(self, t: float) -> list[Event]:
        """Events that end a stream which closed without an error."""
        raise NotImplementedError  # each API's decoder knows its own end

    def text(self) -> str:
        """The text of the tokens read since the last call ("" unless `keep_text`)."""
        texts = self._texts
        if not texts:
            return ""
        text = "".join(texts)
        texts.clear()
        return text

    def _fail(self, t: float, error_class: str, message: str) -> int:
        self.failure = Failure(t, "error", error_class, message)
        return 0


def parse(payload: bytes) -> object:
    """The payload's JSON; None if it does not parse."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None


def error_message(err: object) -> str:
    """The message of a server's error object (`message`, else `detail`, else the object)."""
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or orjson.dumps(err).decode()
        return str(msg)[:500]
    return str(err)[:500]
