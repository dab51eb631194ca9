"""A minimal OpenAI completions stream as an ASGI app, for uvicorn (the server vLLM and SGLang
run) in the keep-alive tests and benchmark: each POST streams `TOKENS` events, a usage event and
[DONE]; each request's X-Harness-Request-ID is kept, and GET /received lists them, so a failure
can be told apart as one the server never received.

    python -m uvicorn tests.driver.asgi_sse:app --port N --timeout-keep-alive 1
"""

from __future__ import annotations

import asyncio
import json

TOKENS = 4
TOKEN_DELAY_S = 0.002
RECEIVED: list[str] = []


async def app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":
        await _reply(send, 200, "application/json", json.dumps(RECEIVED).encode())
        return
    while (await receive()).get("more_body"):
        pass
    headers = dict(scope["headers"])
    RECEIVED.append(headers.get(b"x-harness-request-id", b"?").decode())
    start = {"type": "http.response.start", "status": 200}
    await send(start | {"headers": [(b"content-type", b"text/event-stream")]})
    for i in range(TOKENS):
        await asyncio.sleep(TOKEN_DELAY_S)
        await _event(send, {"choices": [{"index": 0, "text": f" t{i}"}]})
    usage = {"prompt_tokens": 4, "completion_tokens": TOKENS, "total_tokens": 4 + TOKENS}
    await _event(send, {"choices": [], "usage": usage})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _event(send, obj: dict) -> None:
    body = b"data: " + json.dumps(obj).encode() + b"\n\n"
    await send({"type": "http.response.body", "body": body, "more_body": True})


async def _reply(send, status: int, kind: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind.encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
