"""Decoding an Anthropic Messages stream (`POST /v1/messages`) into target events.

The stream: `message_start` (the message, its usage so far), then per content block
`content_block_start`, `content_block_delta`* and `content_block_stop`, then `message_delta`
(the stop reason, the usage at the end) and `message_stop`; `ping` may come at any time and an
`error` event ends it. Each delta that carries output (text, tool-input JSON, thinking) is one
token. A request is complete only with `message_stop` and a usage object.

Usage: Anthropic counts a prompt in three parts (`input_tokens` not read from the cache,
`cache_read_input_tokens` read from it, `cache_creation_input_tokens` written to it), so the
prompt's length is their sum and its cached tokens are the reads. `message_delta`'s values
replace `message_start`'s (they are the final ones). The writes are kept as sent, with their
split by TTL (`cache_creation`), for the run's cost of caching (analysis.hosted_cache).
"""

from __future__ import annotations

from harness.driver.apis.typed_events import TypedEventDecoder, error_text
from harness.driver.target import Done, Event, Failure, Usage

# The delta fields that carry output: text_delta, input_json_delta, thinking_delta.
_OUTPUT_FIELDS = ("text", "partial_json", "thinking")


class MessagesDecoder(TypedEventDecoder):
    """`StreamDecoder`'s interface over an Anthropic Messages stream."""

    __slots__ = ()

    def decode(self, payload: bytes, obj: object, t: float) -> int:
        if type(obj) is not dict:
            return self._fail(t, "MalformedEvent", f"not a JSON object: {payload[:200]!r}")
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj["delta"]
            for name in _OUTPUT_FIELDS:
                text = delta.get(name)
                if text:
                    return self.kept(text)
        elif kind == "message_start":
            self._merge_usage(obj["message"].get("usage"))
        elif kind == "message_delta":
            self._merge_usage(obj.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            return self._fail(t, "StreamError", error_text(obj.get("error"), "type"))
        return 0

    def _merge_usage(self, usage: dict | None) -> None:
        if usage:
            fresh = {k: v for k, v in usage.items() if v is not None}
            self.usage = fresh if self.usage is None else self.usage | fresh

    def finish(self, t: float) -> list[Event]:
        out: list[Event] = []
        if self.usage is not None:
            out.append(messages_usage(self.usage))
        if not self.done:
            out.append(Failure(t, "error", "IncompleteStream", "stream ended without message_stop"))
        elif self.usage is None:
            why = "stream ended without a usage object (message_start / message_delta)"
            out.append(Failure(t, "error", "MissingUsage", why))
        else:
            out.append(Done(t))
        return out


def messages_usage(usage: dict) -> Usage:
    """Anthropic's usage as the target's: the prompt is its three parts, the cached the reads."""
    fresh, read = usage.get("input_tokens"), usage.get("cache_read_input_tokens")
    created = usage.get("cache_creation_input_tokens")
    prompt = fresh + (read or 0) + (created or 0) if type(fresh) is int else None
    by_ttl = usage.get("cache_creation") or {}
    writes = (
        created,
        by_ttl.get("ephemeral_5m_input_tokens"),
        by_ttl.get("ephemeral_1h_input_tokens"),
    )
    return Usage(prompt, usage.get("output_tokens"), read, cache_writes=writes)
