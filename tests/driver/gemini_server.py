"""A test server speaking Google's Gemini API as its reference documents it, on 127.0.0.1:

- `GET /v1beta/models`: `{"models": [{"name": "models/<id>", "inputTokenLimit",
  "outputTokenLimit", "supportedGenerationMethods"}]}` (one model that does not stream, too);
- `POST /v1beta/models/<id>:streamGenerateContent?alt=sse` with the key in `x-goog-api-key`
  (when `key` is set: else 400 `API_KEY_INVALID`), a body of `systemInstruction`, `tools`,
  `toolConfig`, `contents`, `generationConfig` and nothing else: an unknown field is refused
  as Google refuses it (400 `INVALID_ARGUMENT`, "Unknown name ..."), errors being
  `{"error": {"code", "message", "status"}}`;
- the stream: one `data:` `GenerateContentResponse` per `per_chunk` output tokens (text
  `" x<i>"`; with tools, the second half as one `functionCall` part), every chunk with the
  running `usageMetadata` (`promptTokenCount`, `candidatesTokenCount`, `totalTokenCount`,
  `cachedContentTokenCount` where not zero: protobuf's JSON leaves zeros out), the last with
  `finishReason: MAX_TOKENS`; no `[DONE]`.
- Cached tokens: sse_server.py's block prefix memory over the prompt's words (system text,
  each content's role, its parts' words), kept only for prompts of `min_tokens` words or more
  (Gemini's implicit cache writes none shorter).

Faults by session id (`fault-<mode>`): http500, http429 (Google's INTERNAL, RESOURCE_EXHAUSTED),
errorobj (an error object mid-stream), close (the connection cut before finishReason),
nofinish (a clean end without finishReason), nousage (no usageMetadata), malformed (an event
that does not parse), blocked (`promptFeedback.blockReason`, no candidate).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import orjson
from aiohttp import web

from tests.driver.sse_server import FAULT, ServerConfig, SSETestServer

BODY_FIELDS = {"systemInstruction", "tools", "toolConfig", "contents", "generationConfig"}
GENERATION_FIELDS = {"maxOutputTokens", "temperature", "topP", "topK", "seed"}
_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}


def google_error(code: int, message: str) -> web.Response:
    error = {"code": code, "message": message, "status": _STATUS[code]}
    return web.json_response({"error": error}, status=code)


@dataclass
class GeminiServer(SSETestServer):
    config: ServerConfig = field(default_factory=ServerConfig)
    key: str | None = None  # the x-goog-api-key every request must carry
    min_tokens: int = 0  # the implicit cache's minimum prompt, in words
    per_chunk: int = 2  # output tokens per chunk

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/v1beta/models", self._gemini_models)
        app.router.add_post("/v1beta/models/{target}", self._generate)
        return app

    async def _gemini_models(self, request: web.Request) -> web.Response:
        methods = ["generateContent", "countTokens", "streamGenerateContent"]
        cards = [
            {"name": f"models/{m}", "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
             "supportedGenerationMethods": methods}
            for m in self.config.models
        ]  # fmt: skip
        cards.append({"name": "models/embed-only", "supportedGenerationMethods": ["embedContent"]})
        return web.json_response({"models": cards})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["target"].partition(":")
        body = orjson.loads(await request.read())
        refusal = self._refusal(request, model, method, body)
        if refusal is not None:
            return refusal
        entry = self._logged(request, model, body)
        if entry["fault"] in ("http500", "http429"):
            return google_error(int(entry["fault"][4:]), f"injected {entry['fault']}")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await self._stream(request, resp, entry, body)
        return resp

    def _refusal(self, request, model: str, method: str, body: dict) -> web.Response | None:
        if self.key is not None and request.headers.get("x-goog-api-key") != self.key:
            return google_error(400, "API key not valid. Please pass a valid API key.")
        if method != "streamGenerateContent" or request.query.get("alt") != "sse":
            return google_error(400, f"expected streamGenerateContent?alt=sse, got {method!r}")
        if model not in self.config.models:
            return google_error(404, f"models/{model} is not found for API version v1beta")
        config = body.get("generationConfig") or {}
        unknown = sorted(set(body) - BODY_FIELDS) + sorted(set(config) - GENERATION_FIELDS)
        if unknown:
            return google_error(400, f'Invalid JSON payload received. Unknown name "{unknown[0]}"')
        return None

    def _logged(self, request: web.Request, model: str, body: dict) -> dict:
        words = gemini_words(body)
        eligible = len(words) >= self.min_tokens
        sid = request.headers.get("X-Session-ID", "")
        fault = FAULT.search(sid)
        entry = {
            "session_id": sid,
            "request_id": request.headers.get("X-Harness-Request-ID"),
            "fault": fault.group(1) if fault else None,
            "path": request.path,
            "query": request.query_string,
            "model": model,
            "key": request.headers.get("x-goog-api-key"),
            "prompt_tokens": len(words),
            "cached_tokens": self._cached(words) if eligible else 0,
            "body": body,
        }
        self.log.append(entry)
        return entry

    async def _stream(self, request, resp: web.StreamResponse, entry: dict, body: dict) -> None:
        fault, rid = entry["fault"], uuid.uuid4().hex[:12]
        if fault == "blocked":
            blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "responseId": rid}
            return await _send(resp, blocked)
        n = int((body.get("generationConfig") or {}).get("maxOutputTokens") or 16)
        tools = bool(body.get("tools"))
        for start in range(0, n, self.per_chunk):
            end = min(n, start + self.per_chunk)
            if start and fault in ("close", "errorobj", "malformed"):
                return await _inject(request, resp, fault)
            parts = _parts(start, end, n if tools else None)
            candidate: dict = {"content": {"role": "model", "parts": parts}, "index": 0}
            if end == n and fault != "nofinish":
                candidate["finishReason"] = "MAX_TOKENS"
            chunk: dict = {"candidates": [candidate], "modelVersion": entry["model"]}
            if fault != "nousage":
                chunk["usageMetadata"] = _usage(entry, end)
            await _send(resp, chunk | {"responseId": rid})
        entry["output_tokens"] = n
        await resp.write_eof()


def _parts(start: int, end: int, tools_at: int | None) -> list[dict]:
    """The chunk's parts: text, or (past half the output, with tools) one whole function call."""
    if tools_at is not None and start >= tools_at // 2:
        return [{"functionCall": {"name": "t", "args": {"from": start}}}]
    return [{"text": "".join(f" x{i}" for i in range(start, end))}]


def _usage(entry: dict, out: int) -> dict:
    prompt, cached = entry["prompt_tokens"], entry["cached_tokens"]
    usage = {"promptTokenCount": prompt, "candidatesTokenCount": out}
    usage["totalTokenCount"] = prompt + out
    return usage | ({"cachedContentTokenCount": cached} if cached else {})


async def _send(resp: web.StreamResponse, chunk: dict) -> None:
    await resp.write(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n")  # CRLF: SSE allows it


async def _inject(request: web.Request, resp: web.StreamResponse, fault: str) -> None:
    if fault == "close":
        request.transport.close()
        return
    if fault == "malformed":
        await resp.write(b'data: {"candidates": [\n\n')
    else:
        error = {"code": 500, "message": "injected stream error", "status": "INTERNAL"}
        await _send(resp, {"error": error})
    await resp.write_eof()


def gemini_words(body: dict) -> list:
    """The body's prompt as words, in order (the prefix memory's tokens)."""
    out: list = []
    for part in (body.get("systemInstruction") or {}).get("parts") or ():
        out += ["system", *part.get("text", "").split()]
    for content in body["contents"]:
        out.append(content["role"])
        for part in content["parts"]:
            out += _part_words(part)
    return out


def _part_words(part: dict) -> list:
    if "text" in part:
        return part["text"].split()
    if "functionCall" in part:
        call = part["functionCall"]
        return ["functionCall", call["name"], *orjson.dumps(call.get("args")).decode().split()]
    response = part["functionResponse"]
    return ["functionResponse", response["name"], *str(response["response"]).split()]
