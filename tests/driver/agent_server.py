"""The test server speaking the agents' APIs too: Anthropic Messages (`/v1/messages`) and OpenAI
Responses (`/v1/responses`) beside sse_server.py's chat and completions, on one prefix memory.

Each request is logged as in sse_server.py, with its headers. Streams follow the published
formats: Messages `event: message_start` ... `message_stop`, Responses `event: response.created`
... `response.completed`. With tools in the body, the second half of the output is a tool call
(`input_json_delta` / `response.function_call_arguments.delta`). Usage: Messages reports
`cache_read_input_tokens` (and `cache_creation_input_tokens`: the uncached whole blocks),
either the way Anthropic does (`usage_form="anthropic"`: message_start holds the prompt's
parts, message_delta the output) or the way vLLM does (`"vllm"`: message_start only the
prompt's total as input, message_delta all of it); Responses reports
`input_tokens_details.cached_tokens`. `previous_response_id` is honoured: the stored input and
output of that response come before the new items.

Faults by session id (`fault-<mode>`) beside sse_server.py's http500 / http429: `close`,
`malformed`, `errorevent` (Messages `event: error`; Responses `response.failed`), `errorplain`
(Responses' `error` event), `nousage`, `nostop` (no message_stop / response.completed),
`incomplete` (Responses ends with `response.incomplete`, as at max_output_tokens).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import orjson
from aiohttp import web

from tests.driver.sse_server import FAULT, ServerConfig, SSETestServer

HEADERS_LOGGED = (
    "X-Session-ID",
    "X-Parent-Session-ID",
    "X-Root-Session-ID",
    "X-Correlation-ID",
    "X-Dynamo-Session-ID",
    "X-Dynamo-Parent-Session-ID",
    "X-SMG-Routing-Key",
    "x-api-key",
    "anthropic-version",
    "Authorization",
)


@dataclass
class AgentServer(SSETestServer):
    config: ServerConfig = field(default_factory=ServerConfig)
    usage_form: str = "anthropic"  # "anthropic" | "vllm"
    stored: dict = field(default_factory=dict)  # response id -> its words, input and output
    store: bool = True  # keep responses (False: a previous_response_id is answered 404, as vLLM)

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/responses", self._responses)
        return app

    async def _begin(self, request: web.Request, api: str) -> tuple[dict, dict]:
        """The body read and logged; the entry, with the prompt's cached tokens."""
        body = orjson.loads(await request.read())
        if api == "responses":
            words = self.stored.get(body.get("previous_response_id"), []) + self.words(api, body)
        else:
            words = self.words(api, body)
        sid = request.headers.get("X-Session-ID") or request.headers.get("X-Dynamo-Session-ID", "")
        m = FAULT.search(sid)
        entry = {
            "session_id": sid,
            "request_id": request.headers.get("X-Harness-Request-ID"),
            "fault": m.group(1) if m else None,
            "path": request.path,
            "headers": {h: request.headers[h] for h in HEADERS_LOGGED if h in request.headers},
            "prompt_tokens": len(words),
            "cached_tokens": self._cached(words) if self.config.prefix_cache else 0,
            "words": words,
            "body": body,
        }
        self.log.append(entry)
        return entry, body

    async def _open(self, request: web.Request, entry: dict) -> web.StreamResponse:
        """The stream's response (prepared), or an injected HTTP error."""
        fault = entry["fault"]
        if fault in ("http500", "http429"):
            status = int(fault[4:])
            error = {"type": "api_error", "message": f"injected {status}"}
            return web.json_response({"type": "error", "error": error}, status=status)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        return resp

    # ---- Anthropic Messages -------------------------------------------------------------

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        entry, body = await self._begin(request, "messages")
        resp, fault = await self._open(request, entry), entry["fault"]
        if resp.status != 200:
            return resp
        n = self._length(body, entry)
        prompt, cached = entry["prompt_tokens"], entry["cached_tokens"]
        created = (prompt - cached) // self.config.block_size * self.config.block_size
        parts = {
            "input_tokens": prompt - cached - created,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": created,
        }
        start_usage = {"input_tokens": prompt, "output_tokens": 0}
        if self.usage_form == "anthropic":
            start_usage = dict(parts, output_tokens=1)
        message = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
        if fault != "nousage":
            message["usage"] = start_usage
        await _send(resp, "message_start", {"message": message})
        await _send(resp, "ping", {})
        for i, (block, delta) in enumerate(_message_deltas(n, bool(body.get("tools")))):
            if block is not None:
                await _send(resp, "content_block_start", {"index": i, "content_block": block})
            if fault in ("close", "malformed", "errorevent") and i == 1:
                return await _inject(request, resp, fault, "messages")
            await _send(resp, "content_block_delta", {"index": 0, "delta": delta})
            await asyncio.sleep(self.config.token_delay)
        await _send(resp, "content_block_stop", {"index": 0})
        end_usage = {"output_tokens": n}
        if self.usage_form == "vllm":
            end_usage = dict(parts, output_tokens=n)
        delta = {"stop_reason": "max_tokens", "stop_sequence": None}
        ending = {"delta": delta} if fault == "nousage" else {"delta": delta, "usage": end_usage}
        await _send(resp, "message_delta", ending)
        if fault != "nostop":
            await _send(resp, "message_stop", {})
        await resp.write_eof()
        return resp

    # ---- OpenAI Responses ------------------------------------------------------------------

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        entry, body = await self._begin(request, "responses")
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.stored:
            error = {"message": f"Response with id '{previous}' not found.", "code": 404}
            return web.json_response({"error": error}, status=404)
        resp, fault = await self._open(request, entry), entry["fault"]
        if resp.status != 200:
            return resp
        n = self._length(body, entry)
        rid = f"resp_{uuid.uuid4().hex[:12]}"
        response = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        await _send(resp, "response.created", {"response": response})
        await _send(resp, "response.in_progress", {"response": response})
        tools, out_words = bool(body.get("tools")), []
        for i in range(n):
            if fault in ("close", "malformed", "errorevent", "errorplain") and i == 1:
                return await _inject(request, resp, fault, "responses", response)
            kind = "function_call_arguments" if tools and i >= n // 2 else "output_text"
            await _send(resp, f"response.{kind}.delta", {"item_id": "i", "delta": f" x{i}"})
            out_words.append(f"x{i}")
            await asyncio.sleep(self.config.token_delay)
        prompt, cached = entry["prompt_tokens"], entry["cached_tokens"]
        usage = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": n,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + n,
        }
        final = dict(response, status="completed", usage=None if fault == "nousage" else usage)
        if self.store:
            self.stored[rid] = entry["words"] + ["assistant", *out_words]
        if fault == "incomplete":
            final = dict(
                final, status="incomplete", incomplete_details={"reason": "max_output_tokens"}
            )
            await _send(resp, "response.incomplete", {"response": final})
        elif fault != "nostop":
            await _send(resp, "response.completed", {"response": final})
        await resp.write_eof()
        return resp

    def words(self, api: str, body: dict) -> list:
        """The prompt's tokens as this server counts them (a subclass may render a template)."""
        return words_of(api, body)

    def _length(self, body: dict, entry: dict) -> int:
        n = int(body.get("max_tokens") or body.get("max_output_tokens") or 16)
        if self.config.max_output is not None:  # a server that stops early
            n = min(n, self.config.max_output)
        entry["output_tokens"] = n
        entry["t_first_token"] = time.perf_counter()
        return n


def _message_deltas(n: int, tools: bool):
    """(a block to start first or None, the delta) per output token: text, then with tools the
    second half as tool-input JSON."""
    for i in range(n):
        if tools and i >= n // 2:
            block = {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}
            yield (
                (block if i == n // 2 else None),
                {"type": "input_json_delta", "partial_json": f" x{i}"},
            )
        else:
            block = {"type": "text", "text": ""}
            yield (block if i == 0 else None), {"type": "text_delta", "text": f" x{i}"}


async def _inject(request, resp, fault: str, api: str, response: dict | None = None):
    if fault == "close":
        request.transport.close()
        return resp
    if fault == "malformed":
        await resp.write(b'event: content_block_delta\ndata: {"type": \n\n')
    elif api == "messages":
        error = {"type": "overloaded_error", "message": "injected overload"}
        await _send(resp, "error", {"error": error})
    elif fault == "errorevent":
        error = {"code": "server_error", "message": "injected failure"}
        await _send(
            resp, "response.failed", {"response": dict(response, status="failed", error=error)}
        )
    else:
        await _send(
            resp, "error", {"code": "server_error", "message": "injected error", "param": None}
        )
    await resp.write_eof()
    return resp


async def _send(resp: web.StreamResponse, kind: str, data: dict) -> None:
    payload = orjson.dumps({"type": kind, **data})
    await resp.write(b"event: " + kind.encode() + b"\ndata: " + payload + b"\n\n")


def words_of(api: str, body: dict) -> list:
    """The body's prompt as words, in order (the prefix memory's tokens)."""
    out: list = []
    if api == "messages":
        for block in body.get("system") or ():
            out += ["system", *block["text"].split()]
        for message in body["messages"]:
            out.append(message["role"])
            for block in message["content"]:
                out += _block_words(block)
    else:
        out += ["system", *(body.get("instructions") or "").split()]
        for item in body["input"]:
            out += _item_words(item)
    return out


def _block_words(block: dict) -> list:
    kind = block["type"]
    if kind == "text":
        return block["text"].split()
    if kind == "tool_use":
        return ["tool_use", block["name"], *orjson.dumps(block["input"]).decode().split()]
    return ["tool_result", *str(block["content"]).split()]


def _item_words(item: dict) -> list:
    kind = item.get("type", "message")
    if kind == "message":
        return [item["role"], *str(item["content"]).split()]
    if kind == "function_call":
        return ["function_call", item["name"], *item["arguments"].split()]
    return ["function_call_output", *str(item["output"]).split()]
