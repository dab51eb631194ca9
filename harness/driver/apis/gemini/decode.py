"""Decoding a Gemini stream (`streamGenerateContent?alt=sse`) into target events.

Each event is a whole `GenerateContentResponse`: `candidates[0].content.parts` (text, thought
summaries marked `thought`, `functionCall`), `finishReason` on the candidate's last chunk, and
`usageMetadata` with the running counts (`promptTokenCount`, `candidatesTokenCount`,
`thoughtsTokenCount`, `cachedContentTokenCount`; a count of zero is left out, as protobuf's JSON
leaves out every default). No `[DONE]`: the stream ends after the chunk with `finishReason`. An
`error` object (`code`, `message`, `status`) fails the request, so does a prompt blocked
(`promptFeedback.blockReason`, no candidate).

Tokens: an event's output tokens are the growth of `candidatesTokenCount + thoughtsTokenCount`
since the last (Gemini bills thoughts as output, and counts them as the model makes them, shown
or not: thoughts not asked for arrive in the count of the first chunk after them); an event
with output and no count counts one. Usage: the prompt is `promptTokenCount` (cached part
included), the cached tokens `cachedContentTokenCount` (0 when left out). A request is complete
only with a `finishReason` and a usage.
"""

from __future__ import annotations

from harness.driver.apis.stream import StreamDecoder, parse
from harness.driver.apis.typed_events import error_text
from harness.driver.target import Done, Event, Failure, Usage


class GeminiDecoder(StreamDecoder):
    """`StreamDecoder`'s interface over a Gemini stream; `finish_reason` as the server gave it."""

    __slots__ = ("finish_reason", "_counted")

    def __init__(self, keep_text: bool = False) -> None:
        super().__init__(keep_text)
        self.finish_reason: str | None = None
        self._counted = 0  # output tokens given to events so far

    def read(self, payloads: list[bytes], t: float) -> int:
        tokens = 0
        for payload in payloads:
            try:
                tokens += self.decode(payload, parse(payload), t)
            except (AttributeError, TypeError, KeyError, IndexError):  # JSON of the wrong shape
                self._fail(t, "MalformedEvent", f"unexpected event shape: {payload[:200]!r}")
            if self.failure is not None:
                break
        if tokens:
            self.started = True
        return tokens

    def decode(self, payload: bytes, obj: object, t: float) -> int:
        """Output tokens of one event; `obj` is the parsed payload, or None if it did not parse."""
        if type(obj) is not dict:
            return self._fail(t, "MalformedEvent", f"not a JSON object: {payload[:200]!r}")
        if obj.get("error") is not None:
            return self._fail(t, "StreamError", error_text(obj["error"], "status"))
        candidates = obj.get("candidates")
        if not candidates:
            blocked = (obj.get("promptFeedback") or {}).get("blockReason")
            if blocked:
                return self._fail(t, "PromptBlocked", f"the prompt was blocked: {blocked}")
        shown = self._shown(candidates[0]) if candidates else 0
        usage = obj.get("usageMetadata")
        if usage:
            self.usage = usage
        return self._tokens(shown, usage)

    def _shown(self, candidate: dict) -> int:
        """The candidate's output parts in this chunk (their text kept when asked); its end."""
        if candidate.get("finishReason"):
            self.finish_reason, self.done = candidate["finishReason"], True
        parts = (candidate.get("content") or {}).get("parts") or ()
        shown = 0
        for part in parts:
            text = part.get("text")
            if text:
                shown += 1
                if self._texts is not None:
                    self._texts.append(text)
            elif part.get("functionCall") is not None:
                shown += 1
        return shown

    def _tokens(self, shown: int, usage: dict | None) -> int:
        """The event's tokens: the running count's growth, else one for shown output."""
        running = _output(usage) if usage else None
        if running is None:
            tokens = 1 if shown else 0
        else:
            tokens = max(0, running - self._counted)
        self._counted += tokens
        return tokens

    def finish(self, t: float) -> list[Event]:
        out: list[Event] = []
        if self.usage is not None:
            out.append(gemini_usage(self.usage))
        if not self.done:
            why = "stream ended before a candidate's finishReason"
            out.append(Failure(t, "error", "IncompleteStream", why))
        elif self.usage is None:
            out.append(Failure(t, "error", "MissingUsage", "stream ended without usageMetadata"))
        else:
            out.append(Done(t))
        return out


def _output(usage: dict) -> int | None:
    """Output tokens so far (candidates and thoughts); None when the usage counts neither."""
    counts = [usage.get("candidatesTokenCount"), usage.get("thoughtsTokenCount")]
    given = [c for c in counts if type(c) is int]
    return sum(given) if given else None


def gemini_usage(usage: dict) -> Usage:
    """Gemini's usage as the target's: output is candidates and thoughts; a count left out is
    zero (protobuf's JSON leaves out defaults) once the prompt's count is given."""
    prompt = usage.get("promptTokenCount")
    if type(prompt) is not int:
        return Usage(None, _output(usage), None)
    return Usage(prompt, _output(usage) or 0, usage.get("cachedContentTokenCount") or 0)
