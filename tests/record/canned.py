"""A loopback upstream with canned answers, for the proxy's byte-for-byte tests.

It keeps what it received (method, path, headers, body) and answers by path:

- `/v1/chat/completions`: a chat stream (three chunks, usage, `[DONE]`) written read by read,
  or, unstreamed, a gzip-encoded JSON body with its Content-Length;
- `/v1/messages`: an Anthropic stream (tool_use, usage with cache reads, diagnostics), or JSON;
- `/v1/responses`: a 429 with Retry-After (a server error, passed through);
- `/v1/completions`: a stream cut after its first event (the connection closed);
- `GET /v1/models`: a model list.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import dataclass, field

from aiohttp import web

CHAT_EVENTS = [
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        ],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "Read", "arguments": '{"path": '},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]},
                "finish_reason": "tool_calls",
            }
        ],
    },
    {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": 50,
            "completion_tokens": 7,
            "total_tokens": 57,
            "prompt_tokens_details": {"cached_tokens": 32},
        },
    },
]
CHAT_JSON = {
    "id": "c2",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Hi there"},
        }
    ],
    "usage": {
        "prompt_tokens": 40,
        "completion_tokens": 2,
        "total_tokens": 42,
        "prompt_tokens_details": {"cached_tokens": 16},
    },
}
MESSAGES_EVENTS = [
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 20,
                    "output_tokens": 1,
                },
                "diagnostics": {"cache_miss_reason": {"type": "tools_changed"}},
            },
        },
    ),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Sure."},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"command": "ls"}'},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]
MESSAGES_JSON = {
    "id": "msg_2",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "Done."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 5,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "output_tokens": 2,
    },
}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Canned:
    seen: list[Seen] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(
            Seen(
                request.method,
                request.path,
                {k.lower(): v for k, v in request.headers.items()},
                body,
            )
        )
        stream = request.method == "POST" and json.loads(body or b"{}").get("stream") is True
        if request.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
        if request.path == "/v1/responses":
            return web.json_response(
                {"error": {"message": "slow down", "type": "rate_limit"}},
                status=429,
                headers={"Retry-After": "7"},
            )
        if request.path == "/v1/completions":
            return await self._cut(request)
        if request.path == "/v1/messages":
            return await self._messages(request, stream)
        return await (self._chat_stream(request) if stream else self._chat_json())

    async def _chat_stream(self, request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "X-Upstream": "yes"}
        )
        await resp.prepare(request)
        for event in CHAT_EVENTS:
            await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            await asyncio.sleep(0.005)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _chat_json(self) -> web.Response:
        data = gzip.compress(json.dumps(CHAT_JSON).encode())
        return web.Response(
            body=data,
            headers={
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "X-Upstream": "yes",
            },
        )

    async def _messages(self, request, stream: bool) -> web.StreamResponse:
        if not stream:
            return web.json_response(MESSAGES_JSON)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for kind, data in MESSAGES_EVENTS:
            await resp.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
        await resp.write_eof()
        return resp

    async def _cut(self, request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"id": "x", "choices": [{"index": 0, "text": "a"}]}\n\n')
        await asyncio.sleep(0.01)
        assert request.transport is not None
        request.transport.close()
        return resp
