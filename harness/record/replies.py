"""What came back for a captured request: its output (text, tool calls), usage and cache fields.

A copy of the response's bytes is fed to a `ReplyReader` as they pass through the proxy (the
client gets the original bytes, untouched); `finish` reads what was fed. Streams are
Server-Sent Events (OpenAI chat and completions chunks, Anthropic Messages events, OpenAI
Responses events); other bodies are JSON. The usage is kept as the upstream reported it, and
normalized beside it: `prompt_tokens` (Anthropic: input + cache creation + cache reads, which it
reports apart), `output_tokens`, `cached_tokens` (OpenAI's `prompt_tokens_details`, Anthropic's
cache reads, Responses' `input_tokens_details`), and Anthropic's cache writes and `diagnostics`
(its `cache_miss_reason`) where present.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.driver.http import SSEParser
from harness.record.conversation import response_item


@dataclass
class Reply:
    text: str = ""
    reasoning: str = ""
    calls: list[dict] = field(default_factory=list)  # {id, name, arguments}
    usage: dict | None = None  # as reported
    diagnostics: dict | None = None  # Anthropic's cache diagnostics, as reported
    response_id: str | None = None
    finish_reason: str | None = None
    error: str | None = None  # an error the body reported (a stream that failed, an error JSON)
    events: int = 0  # stream events read

    def message(self) -> dict:
        """The reply as the assistant message an agent sends back (chat form)."""
        content = [t for t in (self.reasoning, self.text) if t]
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if self.calls:
            msg["tool_calls"] = list(self.calls)
        return msg

    def normalized(self) -> dict[str, int | None]:
        """prompt_tokens, output_tokens, cached_tokens, cache_creation_tokens, as reported."""
        u = self.usage or {}
        read, write = (
            _int(u.get("cache_read_input_tokens")),
            _int(u.get("cache_creation_input_tokens")),
        )
        if "prompt_tokens" in u:
            prompt, out = _int(u.get("prompt_tokens")), _int(u.get("completion_tokens"))
            cached = _int((u.get("prompt_tokens_details") or {}).get("cached_tokens"))
        elif read is not None or write is not None:  # Anthropic: input excludes cached tokens
            uncached = _int(u.get("input_tokens"))
            prompt = None if uncached is None else uncached + (read or 0) + (write or 0)
            out, cached = _int(u.get("output_tokens")), read
        else:
            prompt, out = _int(u.get("input_tokens")), _int(u.get("output_tokens"))
            cached = _int((u.get("input_tokens_details") or {}).get("cached_tokens"))
        return {
            "prompt_tokens": prompt,
            "output_tokens": out,
            "cached_tokens": cached,
            "cache_creation_tokens": write,
        }


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ReplyReader:
    """Reads one response's bytes as they come (`feed`), then the reply (`finish`)."""

    def __init__(self, api: str, stream: bool) -> None:
        self.api, self.reply = api, Reply()
        self._sse = SSEParser() if stream else None
        self._body = bytearray()
        self._calls: dict[int, dict] = {}  # streamed tool calls by index
        self._dropped: Counter = Counter()

    def feed(self, data: bytes) -> None:
        if self._sse is None:
            self._body += data
            return
        for payload in self._sse.feed(data):
            if payload.strip() == b"[DONE]":
                continue
            try:
                event = json.loads(payload)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.reply.events += 1
                self._event(event)

    def finish(self) -> Reply:
        if self._sse is None and self._body:
            try:
                body = json.loads(self._body)
            except ValueError:
                body = None
            if isinstance(body, dict):
                self._whole(body)
        self.reply.calls += [self._calls[i] for i in sorted(self._calls)]
        return self.reply

    # ---- streams ---------------------------------------------------------------------------

    def _event(self, event: dict) -> None:
        if isinstance(event.get("error"), dict) or event.get("type") == "error":
            error = event.get("error") or {}
            self.reply.error = str(error.get("message") or error)[:500]
        if self.api in ("chat", "completions"):
            self._chunk(event)
        elif self.api == "messages":
            self._messages_event(event)
        else:
            self._responses_event(event)

    def _chunk(self, chunk: dict) -> None:
        r = self.reply
        r.response_id = r.response_id or chunk.get("id")
        if isinstance(chunk.get("usage"), dict):
            r.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            r.finish_reason = choice.get("finish_reason") or r.finish_reason
            delta = choice.get("delta") if "delta" in choice else choice
            r.text += (delta.get("content") if "delta" in choice else choice.get("text")) or ""
            r.reasoning += delta.get("reasoning_content") or delta.get("reasoning") or ""
            for call in delta.get("tool_calls") or []:
                self._call_piece(call)

    def _call_piece(self, piece: dict) -> None:
        call = self._calls.setdefault(
            piece.get("index", 0), {"id": "", "name": "", "arguments": ""}
        )
        function = piece.get("function") or {}
        call["id"] = piece.get("id") or call["id"]
        call["name"] += function.get("name") or ""
        call["arguments"] += function.get("arguments") or ""

    def _messages_event(self, event: dict) -> None:
        r, kind = self.reply, event.get("type")
        if kind == "message_start":
            self._message_head(event.get("message") or {})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") in ("tool_use", "server_tool_use"):
                self._calls[event.get("index", len(self._calls))] = {
                    "id": block.get("id") or "",
                    "name": block.get("name") or "",
                    "arguments": "",
                }
        elif kind == "content_block_delta":
            delta, index = event.get("delta") or {}, event.get("index")
            r.text += delta.get("text") or ""
            r.reasoning += delta.get("thinking") or ""
            if delta.get("type") == "input_json_delta" and index in self._calls:
                self._calls[index]["arguments"] += delta.get("partial_json") or ""
        elif kind == "message_delta":
            r.finish_reason = (event.get("delta") or {}).get("stop_reason") or r.finish_reason
            r.usage = {**(r.usage or {}), **(event.get("usage") or {})}

    def _message_head(self, message: dict) -> None:
        self.reply.response_id = message.get("id")
        self.reply.usage = dict(message.get("usage") or {})
        if isinstance(message.get("diagnostics"), dict):
            self.reply.diagnostics = message["diagnostics"]

    def _responses_event(self, event: dict) -> None:
        response = event.get("response")
        if isinstance(response, dict):
            self.reply.response_id = response.get("id") or self.reply.response_id
            if event.get("type") in (
                "response.completed",
                "response.incomplete",
                "response.failed",
            ):
                self._response(response)

    # ---- whole bodies ----------------------------------------------------------------------

    def _whole(self, body: dict) -> None:
        if isinstance(body.get("error"), dict):
            self.reply.error = str(body["error"].get("message") or body["error"])[:500]
        if self.api in ("chat", "completions"):
            self._chunk(body)
            for choice in body.get("choices") or []:
                if choice.get("index", 0) == 0 and isinstance(choice.get("message"), dict):
                    self._chat_message(choice["message"])
        elif self.api == "messages":
            self._message_head(body)
            self.reply.finish_reason = body.get("stop_reason")
            self._message_blocks(body.get("content") or [])
        else:
            self._response(body)

    def _chat_message(self, message: dict) -> None:
        self.reply.text += message.get("content") or ""
        self.reply.reasoning += message.get("reasoning_content") or message.get("reasoning") or ""
        for i, call in enumerate(message.get("tool_calls") or []):
            self._call_piece({"index": i, **call})

    def _message_blocks(self, blocks: list) -> None:
        for i, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                self.reply.text += block.get("text") or ""
            elif kind == "thinking":
                self.reply.reasoning += block.get("thinking") or ""
            elif kind in ("tool_use", "server_tool_use"):
                args = json.dumps(block.get("input") or {})
                self._calls[i] = {
                    "id": block.get("id") or "",
                    "name": block.get("name") or "",
                    "arguments": args,
                }

    def _response(self, response: dict) -> None:
        r = self.reply
        r.response_id = response.get("id") or r.response_id
        r.usage = response.get("usage") if isinstance(response.get("usage"), dict) else r.usage
        r.finish_reason = response.get("status")
        if isinstance(response.get("error"), dict):
            r.error = str(response["error"].get("message") or response["error"])[:500]
        messages: list[dict] = []
        for item in response.get("output") or []:
            if isinstance(item, dict):
                response_item(item, messages, self._dropped)
        for m in messages:
            if m["role"] == "assistant":
                r.text += "".join(m["content"]) if not m.get("tool_calls") or m["content"] else ""
                r.calls += m.get("tool_calls", [])
