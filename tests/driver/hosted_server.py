"""A fake Anthropic Messages API: a real aiohttp server whose prompt cache follows the hosted
rules, for the analyzer's "ineligible" and "expired" (harness/analysis/hosted_cache.py).

- Tokens: the body's turns rendered as tests/trace/chat_fixtures.py's template does (`<s>role
  content</s>` per message, the system blocks joined into one message, `<s>assistant` to
  generate), so the analyzer, given that tokenizer folder, counts the prompts exactly.
- The cache holds prefixes ending at a `cache_control` breakpoint (a block's, or the top-level
  marker's: the last block), at most four per request, and only those of `min_tokens` or more:
  a shorter one is not cached, and no error is raised. A lookup checks each breakpoint and the
  message boundaries up to 20 before it; an entry lives `ttl_s` after its last use (a hit
  refreshes it).
- The stream is the Messages API's: `message_start` (usage: `input_tokens`,
  `cache_read_input_tokens`, `cache_creation_input_tokens`, `cache_creation.ephemeral_5m_input_tokens`
  / `ephemeral_1h_input_tokens`), `content_block_start`, `ping`, `content_block_delta` per token,
  `content_block_stop`, `message_delta` (stop reason, output tokens), `message_stop`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import orjson
from aiohttp import web

from tests.driver.sse_server import ServerConfig, SSETestServer
from tests.trace.chat_fixtures import build_tokenizer

LOOKBACK = 20


@dataclass
class HostedServer(SSETestServer):
    config: ServerConfig = field(default_factory=ServerConfig)
    min_tokens: int = 1024
    ttl_s: float = 300.0
    cache: dict[bytes, float] = field(default_factory=dict)  # prefix -> last use (perf_counter)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.tokenizer = build_tokenizer()

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_post("/v1/messages", self._messages)
        return app

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        now = time.perf_counter()
        tokens, ends, marked = self.render(body)
        read, written = self.lookup(tokens, ends, marked, now)
        usage = {
            "input_tokens": len(tokens) - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "cache_creation": _by_ttl(body, written),
            "output_tokens": 1,
        }
        n = int(body.get("max_tokens") or 16)
        self.log.append({"t": now, "prompt_tokens": len(tokens), "usage": usage, "body": body})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        message = {"id": f"msg_{len(self.log)}", "type": "message", "role": "assistant"}
        message |= {"content": [], "model": body["model"], "stop_reason": None, "usage": usage}
        await _send(resp, "message_start", {"message": message})
        block = {"type": "text", "text": ""}
        await _send(resp, "content_block_start", {"index": 0, "content_block": block})
        await _send(resp, "ping", {})
        for i in range(n):
            delta = {"type": "text_delta", "text": f" w{i}"}
            await _send(resp, "content_block_delta", {"index": 0, "delta": delta})
        await _send(resp, "content_block_stop", {"index": 0})
        end = {"stop_reason": "max_tokens", "stop_sequence": None}
        await _send(resp, "message_delta", {"delta": end, "usage": {"output_tokens": n}})
        await _send(resp, "message_stop", {})
        await resp.write_eof()
        return resp

    def render(self, body: dict) -> tuple[list[int], list[int], list[int]]:
        """(the prompt's token ids, each message's end, the ends that carry a breakpoint)."""
        system = body.get("system") or []
        chat = [("system", system)] if system else []
        chat += [(m["role"], m["content"]) for m in body["messages"]]
        text, ends, marked = "", [], []
        for role, blocks in chat:
            text += f"<s>{role}\n{''.join(b.get('text', '') for b in blocks)}</s>\n"
            ends.append(len(self.tokenizer.encode(text, add_special_tokens=False).ids))
            if any("cache_control" in b for b in blocks):
                marked.append(ends[-1])
        if body.get("cache_control"):
            marked.append(ends[-1])
        ids = self.tokenizer.encode(text + "<s>assistant\n", add_special_tokens=False).ids
        return ids, ends, sorted(set(marked))[-4:]

    def lookup(self, tokens: list[int], ends: list[int], marked: list[int], now: float):
        """(tokens read from the cache, tokens written to it); refreshes what it read."""
        alive = {k for k, t in self.cache.items() if now - t <= self.ttl_s}
        hit = 0
        for p in marked:
            i = ends.index(p)
            for b in ends[max(0, i - LOOKBACK) : i + 1]:
                prefix = _prefix(tokens, b)
                if b > hit and prefix in alive:
                    hit = b
        for b in [b for b in ends if b <= hit and _prefix(tokens, b) in alive]:
            self.cache[_prefix(tokens, b)] = now  # a read refreshes its entry
        written = 0
        for p in marked:
            if p >= self.min_tokens and p > hit:
                self.cache[_prefix(tokens, p)] = now
                written = p - hit
        return hit, written


def _prefix(tokens: list[int], n: int) -> bytes:
    return orjson.dumps(tokens[:n])


def _by_ttl(body: dict, written: int) -> dict:
    marks = [b.get("cache_control") for m in body["messages"] for b in m["content"]]
    marks += [b.get("cache_control") for b in body.get("system") or []]
    marks.append(body.get("cache_control"))
    hour = any(m and m.get("ttl") == "1h" for m in marks)
    return {
        "ephemeral_5m_input_tokens": 0 if hour else written,
        "ephemeral_1h_input_tokens": written if hour else 0,
    }


async def _send(resp: web.StreamResponse, event: str, data: dict) -> None:
    payload = orjson.dumps({"type": event, **data})
    await resp.write(b"event: " + event.encode() + b"\ndata: " + payload + b"\n\n")
