"""Decoding an OpenAI Responses stream (`POST /v1/responses`) into target events.

The stream: `response.created` (the response's id), `response.in_progress`, output items
(`response.output_item.added`, `response.content_part.added`, deltas, their `.done` events),
then `response.completed` (or `response.incomplete`: stopped by `max_output_tokens`) holding the
whole response with its usage. `response.failed` and `error` events end it. Every `*.delta`
event with a non-empty `delta` string is one token: text (`response.output_text.delta`),
function-call arguments, reasoning text, refusals. Usage: `input_tokens` is the whole prompt,
`input_tokens_details.cached_tokens` the part read from the cache.
"""

from __future__ import annotations

from harness.driver.apis.typed_events import TypedEventDecoder, error_text
from harness.driver.target import Done, Event, Failure, Usage

_FINAL = ("response.completed", "response.incomplete")


class ResponsesDecoder(TypedEventDecoder):
    """`StreamDecoder`'s interface over a Responses stream; `response_id` names the response
    (for a next request's `previous_response_id`)."""

    __slots__ = ("response_id",)

    def __init__(self, keep_text: bool = False) -> None:
        super().__init__(keep_text)
        self.response_id: str | None = None

    def decode(self, payload: bytes, obj: object, t: float) -> int:
        if type(obj) is not dict:
            if payload.strip() == b"[DONE]":  # not in the Responses API; harmless if sent
                return 0
            return self._fail(t, "MalformedEvent", f"not a JSON object: {payload[:200]!r}")
        kind = obj["type"]
        if kind.endswith(".delta"):
            delta = obj.get("delta")
            if type(delta) is str and delta:
                return self.kept(delta)
        elif kind == "response.created":
            self.response_id = obj["response"].get("id")
        elif kind in _FINAL:
            response = obj["response"]
            self.response_id = response.get("id") or self.response_id
            self.usage, self.done = response.get("usage"), True
        elif kind == "response.failed":
            return self._fail(t, "StreamError", error_text(obj["response"].get("error"), "code"))
        elif kind == "error":
            return self._fail(t, "StreamError", error_text(obj.get("error") or obj, "code"))
        return 0

    def finish(self, t: float) -> list[Event]:
        out: list[Event] = []
        if self.usage is not None:
            details = self.usage.get("input_tokens_details") or {}
            usage = self.usage
            out.append(
                Usage(
                    usage.get("input_tokens"),
                    usage.get("output_tokens"),
                    details.get("cached_tokens"),
                )
            )
        if not self.done:
            why = "stream ended without response.completed"
            out.append(Failure(t, "error", "IncompleteStream", why))
        elif self.usage is None:
            why = "the final response carries no usage object"
            out.append(Failure(t, "error", "MissingUsage", why))
        else:
            out.append(Done(t))
        return out
