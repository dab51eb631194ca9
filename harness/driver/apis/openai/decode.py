"""Decoding OpenAI streaming payloads (chat and completions) into target events.

A request counts as complete only when its stream carried `[DONE]` and a usage object; an
error object or an unparseable event fails it at once (its numbers cannot be trusted).
"""

from __future__ import annotations

import re

import orjson

from harness.driver.apis.stream import StreamDecoder, error_message, parse
from harness.driver.target import Done, Event, Failure, SpecCounts, Usage

_loads = orjson.loads
_JSONError = orjson.JSONDecodeError


class ChatStreamDecoder(StreamDecoder):
    """Counts the output tokens of each read's payloads: one chunk per read.

    Events that arrive in one read share one arrival time, so they form one chunk with their
    summed tokens: splitting them would only add zero-length gaps to the inter-token latency.

    A stream's content events differ only in their text: once one has been parsed, the bytes
    around its text are the stream's template (`_Template`), and a later event with the same
    bytes around a plain JSON string is read without building its objects. Anything else (a
    usage, an error, another shape, an escape in the text) is parsed in full.
    """

    __slots__ = (
        "sglext",
        "spec",
        "_completion",
        "_texts",
        "_template",
    )

    def __init__(self, keep_text: bool = False, template: bool = True) -> None:
        super().__init__(keep_text)
        self.sglext: dict | None = None  # SGLang's extension chunk (cached tokens by tier)
        self.spec: object = None  # vLLM's per-request `metrics.speculative_decoding`
        self._completion = 0  # cumulative completion tokens (continuous usage stats)
        self._template = _Template(3 if template else 0)

    def read(self, payloads: list[bytes], t: float) -> int:
        """The output tokens of one read's events; on a bad event `failure` is set and decoding
        stops. The text of the tokens counted so far (when kept) is `text()`."""
        tokens, texts, tm = 0, self._texts, self._template
        head, tail, size, lh, lt = tm.fit()
        for payload in payloads:
            # Fast path, inlined (it runs for every token): an event that fits the template
            # with non-empty ASCII text between (empty text may hide a reasoning delta).
            if size and len(payload) > size and payload.startswith(head) and payload.endswith(tail):
                mid = payload[lh:-lt]
                if mid.isascii() and _SPECIAL(mid) is None:
                    tokens += 1
                    if texts is not None:
                        texts.append(mid.decode("ascii"))
                    continue
            tokens += self._event(payload, t)
            if self.failure is not None:
                break
            head, tail, size, lh, lt = tm.fit()
        if tokens:
            self.started = True
        return tokens

    def _event(self, payload: bytes, t: float) -> int:
        """One event parsed in full; a plain content delta becomes the template if none is."""
        if payload == b"[DONE]":  # every stream's last: no JSON, spare the parser its exception
            self.done = True
            return 0
        obj = parse(payload)
        try:
            text = _plain_text(obj)
            if text is None:
                return self.decode(payload, obj, t)
        except (AttributeError, TypeError, IndexError, KeyError):  # JSON of the wrong shape
            self._fail(t, "MalformedEvent", f"unexpected event shape: {payload[:200]!r}")
            return 0
        self._template.learn(payload, text)
        if self._texts is not None:
            self._texts.append(text)
        return 1

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
            return self._fail(t, "StreamError", error_message(obj["error"]))
        choices = obj.get("choices")
        text = _choice_text(choices[0]) if choices else ""
        tokens = 1 if text or (choices and _held_back(choices[0])) else 0
        if obj.get("sglext"):
            self.sglext = obj["sglext"]
        usage = obj.get("usage")
        if usage:
            self.usage = usage
            metrics = obj.get("metrics")  # vLLM puts it on the final usage chunk, beside usage
            if type(metrics) is dict:
                self.spec = metrics.get("speculative_decoding")
            so_far = usage.get("completion_tokens")
            if choices and type(so_far) is int:  # continuous usage stats: exact tokens per event
                tokens, self._completion = max(0, so_far - self._completion), so_far
        if tokens and self._texts is not None:
            self._texts.append(text)  # a token whose text is held back (partial UTF-8) adds ""
        return tokens

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
                    spec_counts(self.spec),
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


# vLLM's SpeculativeDecodingMetrics (vllm/entrypoints/generate/base/protocol.py): verify steps,
# draft tokens proposed, draft tokens accepted (the bonus token excluded).
_SPEC_KEYS = ("num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens")


def spec_counts(spec: object) -> SpecCounts | None:
    """A request's own speculative-decoding counts, from vLLM's per-request form (a server
    started with `--per-request-spec-decode-metrics`); None when the server sent none, or a
    count that is not a whole number."""
    if not isinstance(spec, dict):
        return None
    counts = [spec.get(k) for k in _SPEC_KEYS]
    whole = [v for v in counts if type(v) is int and v >= 0]
    return SpecCounts(*whole) if len(whole) == len(_SPEC_KEYS) else None


def _count_of(value: object) -> int:
    return value if type(value) is int else 0


def _plain_text(obj: object) -> str | None:
    """The text of a plain content delta (chat `delta.content`, completions `text`); None for any
    other event (usage, error, empty text, other shapes): `decode` reads those."""
    if type(obj) is not dict or obj.get("usage") is not None or obj.get("error") is not None:
        return None
    choices = obj.get("choices")
    if not choices:
        return None
    choice = choices[0]
    delta = choice.get("delta")
    text = choice.get("text") if delta is None else delta.get("content")
    return text if type(text) is str and text else None


class _Template:
    """The bytes before and after the text of a stream's content events.

    Learnt from a parsed event whose text, as JSON, occurs once in it; checked by parsing the
    event again with other text in that place. An event that starts and ends with those bytes
    and holds between them ASCII without quotes, backslashes or control bytes is the same
    event with that text: exactly what parsing it would give.
    """

    __slots__ = ("head", "tail", "size", "tries")

    _PROBE = "\u2603 probe"

    def __init__(self, tries: int) -> None:
        self.head = self.tail = b""
        self.size = 0  # len(head) + len(tail); 0 until learnt
        self.tries = tries  # a stream whose events never fit stops trying

    def fit(self) -> tuple[bytes, bytes, int, int, int]:
        """head, tail, their summed and own lengths (the tail is never empty once learnt)."""
        return self.head, self.tail, self.size, len(self.head), len(self.tail)

    def learn(self, payload: bytes, text: str) -> None:
        if self.size or self.tries <= 0:
            return
        self.tries -= 1
        quoted = orjson.dumps(text)
        at = payload.find(quoted)
        if at < 0 or payload.find(quoted, at + 1) >= 0:
            return
        head, tail = payload[: at + 1], payload[at + len(quoted) - 1 :]
        if _plain_text(parse(head + self._PROBE.encode() + tail)) == self._PROBE:
            self.head, self.tail, self.size = head, tail, len(head) + len(tail)


_SPECIAL = re.compile(rb'["\\\x00-\x1f]').search  # bytes a JSON string holds only escaped


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


def _held_back(choice: dict) -> bool:
    """An output event whose token's text is held back: empty text, no role. vLLM sends a
    chunk only for new token ids (never an empty one during prefill), so its empty-text chunk
    is a token whose text the detokenizer has not released yet, or a stop token (a reply that
    is only an end-of-sequence token streams just that). The opening role chunk carries none."""
    delta = choice.get("delta")
    if delta is None:
        return choice.get("text") == ""
    return type(delta) is dict and delta.get("content") == "" and "role" not in delta
