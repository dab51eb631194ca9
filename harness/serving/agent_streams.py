"""The framing of an answer per API: OpenAI chat chunks (`data: {...}` ... `[DONE]`),
Anthropic Messages events (`message_start` ... `message_stop`), OpenAI Responses events
(`response.created` ... `response.completed`) and Gemini `GenerateContentResponse` chunks (the
running `usageMetadata` on each, `finishReason` on the last), each from the same engine
outputs; and, for a request that did not ask to stream, the one body each API answers with
(`whole`).

A framing gives the bytes for the stream's opening, for each engine output, for a failure after
the stream began, and for its end (with usage).
"""

from __future__ import annotations

import uuid

import orjson

from harness.serving.async_engine import RequestOutput
from harness.serving.protocol import ApiError
from harness.serving.responses import ResponseBuilder


def sse(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def event(kind: str, data: dict) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


class ChatFraming:
    """OpenAI chat and completions chunks (the builder's own)."""

    def __init__(self, build: ResponseBuilder) -> None:
        self.build = build

    def opening(self) -> list[bytes]:
        return [sse(c) for c in self.build.opening_chunks()]

    def output(self, out: RequestOutput) -> list[bytes]:
        return [sse(c) for c in self.build.chunks(out)]

    def failure(self, err: ApiError) -> list[bytes]:
        return [sse(err.body()), b"data: [DONE]\n\n"]  # vLLM's way to fail a stream begun

    def closing(self) -> list[bytes]:
        return [b"data: [DONE]\n\n"]

    def whole(self) -> dict:
        """The answer as one body, once every output was taken (`build.add`)."""
        return self.build.response()


class MessagesFraming(ChatFraming):
    """Anthropic Messages: one text block; usage split into uncached input and cache reads."""

    def opening(self) -> list[bytes]:
        b = self.build
        usage = {"input_tokens": len(b.api.prompt_ids), "output_tokens": 0}
        message: dict = {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant"}
        message |= {"content": [], "model": b.model, "stop_reason": None, "usage": usage}
        block = {"index": 0, "content_block": {"type": "text", "text": ""}}
        return [event("message_start", {"message": message}), event("content_block_start", block)]

    def output(self, out: RequestOutput) -> list[bytes]:
        text = self.build.add(out)
        delta = {"index": 0, "delta": {"type": "text_delta", "text": text}}
        return [event("content_block_delta", delta)] if text else []

    def failure(self, err: ApiError) -> list[bytes]:
        return [event("error", {"error": {"type": err.type, "message": err.message}})]

    def _stop_and_usage(self) -> tuple[str, dict]:
        b, out = self.build, self.build.last
        stop = "max_tokens" if b.finish_reason == "length" else "end_turn"
        usage = {"input_tokens": 0, "output_tokens": 0}
        if out is not None:
            usage = {
                "input_tokens": out.prompt_tokens - out.cached_tokens,
                "cache_read_input_tokens": out.cached_tokens,
                "cache_creation_input_tokens": 0,
                "output_tokens": out.completion_tokens,
            }
        return stop, usage

    def whole(self) -> dict:
        stop, usage = self._stop_and_usage()
        message: dict = {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant"}
        content = [{"type": "text", "text": self.build.text}]
        message |= {"content": content, "model": self.build.model, "stop_reason": stop}
        return message | {"stop_sequence": None, "usage": usage}

    def closing(self) -> list[bytes]:
        stop, usage = self._stop_and_usage()
        ending = {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage}
        return [
            event("content_block_stop", {"index": 0}),
            event("message_delta", ending),
            event("message_stop", {}),
        ]


class ResponsesFraming(ChatFraming):
    """OpenAI Responses: one message item of output text, announced (item, then content part)
    before its deltas and closed after them, as OpenAI and vLLM do (the openai SDK's stream
    helper refuses a delta it has no item for); usage on the final response."""

    ITEM = {"item_id": "msg_0", "output_index": 0}

    def __init__(self, build: ResponseBuilder) -> None:
        super().__init__(build)
        self.response: dict = {"id": f"resp_{uuid.uuid4().hex}", "object": "response"}
        self.response |= {"model": build.model, "status": "in_progress", "output": []}
        self.sequence = 0

    def _event(self, kind: str, data: dict) -> bytes:
        self.sequence += 1
        return event(kind, data | {"sequence_number": self.sequence - 1})

    def opening(self) -> list[bytes]:
        item = {"type": "message", "id": "msg_0", "status": "in_progress", "role": "assistant"}
        part = {"type": "output_text", "text": "", "annotations": []}
        return [
            self._event("response.created", {"response": self.response}),
            self._event("response.in_progress", {"response": self.response}),
            self._event(
                "response.output_item.added", {"output_index": 0, "item": item | {"content": []}}
            ),
            self._event(
                "response.content_part.added", self.ITEM | {"content_index": 0, "part": part}
            ),
        ]

    def output(self, out: RequestOutput) -> list[bytes]:
        text = self.build.add(out)
        delta = self.ITEM | {"content_index": 0, "delta": text, "logprobs": []}
        return [self._event("response.output_text.delta", delta)] if text else []

    def failure(self, err: ApiError) -> list[bytes]:
        error = {"code": err.code or err.type, "message": err.message}
        failed = self.response | {"status": "failed", "error": error}
        return [self._event("response.failed", {"response": failed})]

    def closing(self) -> list[bytes]:
        final = self.whole()
        (message,) = final["output"]
        (part,) = message["content"]
        text = self.ITEM | {"content_index": 0, "text": part["text"], "logprobs": []}
        return [
            self._event("response.output_text.done", text),
            self._event(
                "response.content_part.done", self.ITEM | {"content_index": 0, "part": part}
            ),
            self._event("response.output_item.done", {"output_index": 0, "item": message}),
            self._event("response.completed", {"response": final}),
        ]

    def whole(self) -> dict:
        b, out = self.build, self.build.last
        text = b.text
        message: dict = {"type": "message", "id": "msg_0", "role": "assistant"}
        message["status"] = "completed"
        message["content"] = [{"type": "output_text", "text": text, "annotations": []}]
        final = self.response | {"status": "completed", "output": [message]}
        if b.finish_reason == "length":
            final["incomplete_details"] = {"reason": "max_output_tokens"}
        if out is not None:
            final["usage"] = {
                "input_tokens": out.prompt_tokens,
                "input_tokens_details": {"cached_tokens": out.cached_tokens},
                "output_tokens": out.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": out.prompt_tokens + out.completion_tokens,
            }
        return final


class GeminiFraming(ChatFraming):
    """Google's Gemini: a chunk per output with its text and the running usage (zero counts left
    out, as protobuf's JSON does), a last one with `finishReason`; no `[DONE]`."""

    def opening(self) -> list[bytes]:
        return []

    def output(self, out: RequestOutput) -> list[bytes]:
        text = self.build.add(out)
        return [sse(self._chunk([{"text": text}], None))] if text else []

    def failure(self, err: ApiError) -> list[bytes]:
        status = "INVALID_ARGUMENT" if err.status < 500 else "INTERNAL"
        return [sse({"error": {"code": err.status, "message": err.message, "status": status}})]

    def closing(self) -> list[bytes]:
        return [sse(self._chunk([{"text": ""}], self._finish()))]

    def whole(self) -> dict:
        return self._chunk([{"text": self.build.text}], self._finish())

    def _finish(self) -> str:
        return "MAX_TOKENS" if self.build.finish_reason == "length" else "STOP"

    def _chunk(self, parts: list[dict], finish: str | None) -> dict:
        candidate: dict = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        chunk: dict = {"candidates": [candidate], "modelVersion": self.build.model}
        out = self.build.last
        if out is not None:
            usage = {
                "promptTokenCount": out.prompt_tokens,
                "candidatesTokenCount": out.completion_tokens,
                "totalTokenCount": out.prompt_tokens + out.completion_tokens,
                "cachedContentTokenCount": out.cached_tokens,
            }
            chunk["usageMetadata"] = {k: v for k, v in usage.items() if v}
        return chunk | {"responseId": self.build.request_id}
