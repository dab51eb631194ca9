"""A server speaking the made-up Toy API (tests/driver/toy_api/) on 127.0.0.1, real SSE: each
request's prompt shares with the longest earlier one its common prefix, in whole blocks."""

from __future__ import annotations

import orjson
from aiohttp import web

BLOCK = 4
MODEL = "toy-model"


class ToyServer:
    def __init__(self) -> None:
        self.log: list[dict] = []  # each request's path, headers and body
        self.prompts: list[list[int]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> ToyServer:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/toy", self.toy)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": MODEL, "owned_by": "toy"}]})

    async def toy(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.log.append({"path": request.path, "headers": dict(request.headers), "body": body})
        tokens, limit = body["tokens"], body["limit"]
        cached = max((_shared(tokens, p) for p in self.prompts), default=0) // BLOCK * BLOCK
        self.prompts.append(tokens)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for k in range(limit):
            await resp.write(
                b"data: " + orjson.dumps({"type": "piece", "text": f"w{k} "}) + b"\n\n"
            )
        tally = {"type": "tally", "prompt": len(tokens), "output": limit, "cached": cached}
        await resp.write(b"data: " + orjson.dumps(tally) + b"\n\n")
        await resp.write_eof()
        return resp


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
