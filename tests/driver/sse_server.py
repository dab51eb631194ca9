"""A small OpenAI-compatible SSE server for the driver's tests and benchmarks: a real aiohttp app.

- TTFT = base + per-uncached-token x prompt tokens not in its own block prefix memory (hash
  chain of whole blocks, hits capped at prompt-1 tokens, as vLLM does); then one event per token
  every `token_delay` seconds. Usage reports `prompt_tokens_details.cached_tokens`. The memory
  keeps every block unless `cache_blocks` bounds it (least recently used out first);
  `skip_last_block` keeps no prompt's last block when the prompt is a whole number of blocks (as
  vLLM 0.32's CPU build was measured to do: docs/metrics.md); `prompt_cap=False` serves whole
  prompts.
- Each request is logged (`server.log`, or GET /log when it runs in its own process) with the
  server-side times (`time.perf_counter()`, CLOCK_MONOTONIC, comparable across processes on one
  Linux machine): headers in (`t_recv`), whole body received (`t_body`), body parsed
  (`t_parsed`), first token written (`t_first_token`); headers of interest and the body.
- `max_model_len`: listed on /v1/models (as vLLM and SGLang do); a request whose prompt plus
  max_tokens exceeds it gets vLLM's HTTP 400 ("This model's maximum context length is ...").
  `overflow: cap` answers as vLLM 0.32 does: only a prompt that alone fills the context is
  refused; otherwise max_tokens is cut to the room left and a larger min_tokens refused.
- `spec_tokens` > 0: n-gram-like speculative decoding, every step drafting `spec_tokens` and
  accepting `spec_accepted`; /metrics serves vLLM's `vllm:spec_decode_*` counters (or SGLang's
  `sglang:spec_accept_*` gauges), the prefix-cache counters beside them; `spec_per_request`
  also puts the request's own counts on its final usage chunk, as vLLM 0.32 started with
  `--per-request-spec-decode-metrics summary` does (`metrics.speculative_decoding`).
- Faults, chosen per request from the session id (X-Session-ID containing `fault-<mode>`):
  http500, http429, close (connection dropped mid-stream), malformed (unparseable event), stall
  (stops sending), slowheaders (no headers for `slow_s`), oversized (one huge event), errorobj
  (an error object in the stream), nousage (no usage object), nodone (no [DONE]), json200 (a
  200 JSON reply), echoauth (a 401 quoting the Authorization header), emptydeltas (every event's
  text empty), plus `http404` like http500. `SilentServer` never answers at all.

Run alone: `python tests/driver/sse_server.py --port 0` prints `PORT <n>` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson
from aiohttp import web

FAULT = re.compile(r"fault-([a-z0-9]+)")


@dataclass
class ServerConfig:
    ttft_base: float = 0.0
    ttft_per_token: float = 0.0  # seconds per uncached prompt token
    token_delay: float = 0.0
    block_size: int = 16
    slow_s: float = 5.0  # slowheaders / stall duration
    oversized_bytes: int = 2 * 1024 * 1024
    keep_body: bool = True
    prefix_cache: bool = True
    cache_blocks: int | None = None  # blocks the prefix memory holds (None: every block)
    skip_last_block: bool = False  # a whole-block prompt's last block is never kept
    prompt_cap: bool = True  # serve at most prompt - 1 tokens
    max_output: int | None = None  # stream at most this many tokens, whatever was asked
    models: tuple[str, ...] = ("test-model", "m")  # what /v1/models lists (the tests' names)
    max_model_len: int | None = None  # on /v1/models; longer requests get vLLM's 400
    overflow: str = "refuse"  # or "cap": vLLM 0.32's, max_tokens cut to the room (see docstring)
    spec_tokens: int = 0  # speculative decoding: draft tokens per step (0: off)
    spec_accepted: int = 0  # draft tokens accepted per step (the last step: what is left)
    spec_per_request: bool = False  # the final usage chunk carries metrics.speculative_decoding
    metrics_flavor: str = "vllm"  # /metrics spec-decode names: vllm (counters), sglang (gauges)
    tokens_per_event: int = 1  # a speculating server's events: up to this many tokens each
    owned_by: str | None = None  # /v1/models `owned_by` (vLLM: "vllm")
    refuse_tools: bool = False  # a request with tools gets vLLM's 400 (started without a parser)


@dataclass
class SSETestServer:
    config: ServerConfig = field(default_factory=ServerConfig)
    log: list[dict] = field(default_factory=list)
    # awaited after each event with the tokens written so far: a test paces the stream on what
    # its client received (order, not timing)
    pace: Callable[[int], Awaitable[None]] | None = None

    def __post_init__(self) -> None:
        self._blocks: dict[int, None] = {}  # in least recently used order
        self.spec = SpecCounters(self.config.spec_tokens)
        self.prefix = {"queries": 0, "hits": 0}
        self._runner: web.AppRunner | None = None
        self.url = ""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/completions", self._handle)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/log", self._get_log)
        return app

    async def start(self, port: int = 0, host: str = "127.0.0.1") -> str:
        """Listen on `host` (a loopback address: 127.0.0.1, or ::1 for IPv6); its base URL."""
        self._runner = web.AppRunner(self.app(), shutdown_timeout=0.2, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _models(self, request: web.Request) -> web.Response:
        limit = self.config.max_model_len
        extra = {} if limit is None else {"max_model_len": limit}
        if self.config.owned_by:
            extra["owned_by"] = self.config.owned_by
        data = [{"id": name, "object": "model", **extra} for name in self.config.models]
        return web.json_response({"object": "list", "data": data})

    async def _metrics(self, request: web.Request) -> web.Response:
        lines = [
            f'vllm:prefix_cache_queries_total{{engine="0"}} {self.prefix["queries"]}.0',
            f'vllm:prefix_cache_hits_total{{engine="0"}} {self.prefix["hits"]}.0',
        ]
        if self.config.spec_tokens:
            lines += self.spec.exposition(self.config.metrics_flavor)
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def _get_log(self, request: web.Request) -> web.Response:
        body = orjson.dumps(self.log)
        if request.query.get("clear"):
            self.log = []
        return web.Response(body=body, content_type="application/json")

    # ---- prompts and the prefix memory -----------------------------------------------------

    def _tokens(self, body: dict) -> list:
        if "messages" in body:
            return [w for m in body["messages"] for w in (m["role"], *_message_text(m).split())]
        prompt = body["prompt"]
        return prompt if isinstance(prompt, list) else prompt.split()

    def _cached(self, tokens: list) -> int:
        b, h, hit = self.config.block_size, 0, 0
        chain = []
        for i in range(0, len(tokens) - b + 1, b):
            h = hash((h, tuple(tokens[i : i + b])))
            chain.append(h)
            if hit == i and h in self._blocks:
                hit = i + b
        if self.config.skip_last_block and chain and len(tokens) % b == 0:
            chain.pop()
        self._keep(chain)
        if not self.config.prompt_cap:
            return hit
        return min(hit, max(0, (len(tokens) - 1) // b * b))

    def _context_check(self, body: dict, prompt: int) -> str | None:
        """vLLM's refusal of a request past max_model_len (None: served, max_tokens maybe cut)."""
        limit, asked = self.config.max_model_len, int(body.get("max_tokens") or 16)
        if limit is None or prompt + asked <= limit:
            return None
        if self.config.overflow == "cap" and prompt < limit:
            body["max_tokens"] = room = limit - prompt
            least = int(body.get("min_tokens") or 0)
            if least > room:
                return f"min_tokens must be less than or equal to max_tokens={room}, got {least}."
            return None
        return (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the "
            "completion). Please reduce the length of the messages or completion."
        )

    def _keep(self, chain: list[int]) -> None:
        for h in chain:  # most recently used last
            self._blocks.pop(h, None)
            self._blocks[h] = None
        limit = self.config.cache_blocks
        while limit is not None and len(self._blocks) > limit:
            del self._blocks[next(iter(self._blocks))]

    # ---- the stream ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        t_recv = time.perf_counter()  # headers in; the body may still be arriving
        raw = await request.read()
        t_body = time.perf_counter()  # the whole body received
        body = orjson.loads(raw)
        t_parsed = time.perf_counter()
        sid = request.headers.get("X-Session-ID", "")
        m = FAULT.search(sid)
        fault = m.group(1) if m else None
        tokens = self._tokens(body)
        cached = self._cached(tokens) if self.config.prefix_cache else 0
        entry = {
            "session_id": sid,
            "request_id": request.headers.get("X-Harness-Request-ID"),
            "fault": fault,
            "path": request.path,
            "query": request.query_string,
            "t_recv": t_recv,
            "t_body": t_body,
            "t_parsed": t_parsed,
            "t_first_token": None,
            "t_end": None,
            "prompt_tokens": len(tokens),
            "cached_tokens": cached,
            "authorization": request.headers.get("Authorization"),
            "body": body if self.config.keep_body else None,
        }
        self.log.append(entry)
        self.prefix["queries"] += len(tokens)
        self.prefix["hits"] += cached
        refusal = self._context_check(body, len(tokens))
        if self.config.refuse_tools and body.get("tools"):  # vLLM without a tool parser
            refusal = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
        if refusal is not None:
            error = {"message": refusal, "type": "BadRequestError", "param": None, "code": 400}
            return web.json_response({"error": error}, status=400)
        if fault in ("http500", "http429", "http404"):
            status = int(fault[4:])
            return web.json_response(
                {"error": {"message": f"injected {status}", "type": "test", "code": status}},
                status=status,
            )
        if fault == "json200":  # a whole reply, as if "stream" had been ignored
            return web.json_response({"choices": [{"text": "hi"}], "usage": {}})
        if fault == "echoauth":  # a 401 whose body quotes the credentials it was sent
            auth = request.headers.get("Authorization", "")
            return web.json_response(
                {"error": {"message": f"invalid credentials: {auth}", "code": 401}}, status=401
            )
        if fault == "slowheaders":
            await asyncio.sleep(self.config.slow_s)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await resp.prepare(request)
            chat = "messages" in body
            await resp.write(_event(_chunk(chat, "", role=True)) if chat else b": keep-alive\n\n")
            ttft = self.config.ttft_base + self.config.ttft_per_token * (len(tokens) - cached)
            if ttft > 0:
                await asyncio.sleep(ttft)
            n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            if self.config.max_output is not None:
                n = min(n, self.config.max_output)
            entry["output_tokens"] = n
            continuous = bool((body.get("stream_options") or {}).get("continuous_usage_stats"))
            usage = {
                "prompt_tokens": len(tokens),
                "completion_tokens": n,
                "total_tokens": len(tokens) + n,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            await self._tokens_out(request, resp, entry, chat, n, fault, continuous, usage)
            entry["t_end"] = time.perf_counter()
        except ConnectionResetError:  # the client went away (timeouts, cancelled runs)
            pass
        return resp

    async def _tokens_out(self, request, resp, entry, chat, n, fault, continuous, usage) -> None:
        delay, k = self.config.token_delay, self.config.tokens_per_event
        for i in range(0, n, k):
            if i == k and fault in ("close", "malformed", "stall", "oversized", "errorobj"):
                await self._inject(request, resp, fault)
                return
            end = min(n, i + k)
            text = "" if fault == "emptydeltas" else "".join(f" x{j}" for j in range(i, end))
            ev = _chunk(chat, text, finish=end == n)
            if continuous:
                ev["usage"] = dict(
                    usage, completion_tokens=end, total_tokens=usage["prompt_tokens"] + end
                )
            if i == 0:
                entry["t_first_token"] = time.perf_counter()
            await resp.write(_event(ev))
            if delay:
                await asyncio.sleep(delay)
            if self.pace is not None:
                await self.pace(end)
        final: dict = {"id": "x", "object": "chunk", "choices": [], "usage": usage}
        if self.config.spec_tokens:
            mine = self.spec.request(n, self.config.spec_accepted)
            if self.config.spec_per_request:
                final["metrics"] = {"speculative_decoding": mine}
        if fault != "nousage":
            await resp.write(_event(final))
        if fault != "nodone":
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()

    async def _inject(self, request: web.Request, resp: web.StreamResponse, fault: str) -> None:
        if fault == "close":
            request.transport.close()
        elif fault == "malformed":
            await resp.write(b'data: {"choices": [\n\n')
        elif fault == "stall":
            await asyncio.sleep(self.config.slow_s)
        elif fault == "oversized":
            await resp.write(b'data: {"pad": "' + b"x" * self.config.oversized_bytes + b'"}\n\n')
        elif fault == "errorobj":
            await resp.write(
                _event({"error": {"message": "injected stream error", "type": "test", "code": 500}})
            )


class SilentServer:
    """A server that accepts connections and never answers a byte (a hung endpoint): every
    request to it waits until the client gives up. `connections` counts the ones accepted."""

    def __init__(self) -> None:
        self.connections = 0
        self._held: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self, host: str = "127.0.0.1") -> str:
        self._server = await asyncio.start_server(self._accept, host, 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        return self.url

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._held.append(writer)

    async def stop(self) -> None:
        for w in self._held:
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


class SpecCounters:
    """What a speculating server counts: drafts (verify steps), drafted and accepted tokens, and
    accepted tokens by draft position. The first output token comes from the prefill."""

    def __init__(self, k: int) -> None:
        self.k, self.drafts, self.drafted, self.accepted = k, 0, 0, 0
        self.per_pos = [0] * k
        self.last_length = self.last_rate = 0.0  # SGLang's gauges: the last request's figures

    def request(self, n: int, accept: int) -> dict:
        """Count one request of `n` output tokens; its own counts in vLLM's per-request form."""
        left, steps, accepted = n - 1, 0, 0
        histogram = [0] * (self.k + 1)
        while left > 0:
            a = min(accept, self.k, left - 1)
            for i in range(a):
                self.per_pos[i] += 1
            histogram[a] += 1
            steps, accepted, left = steps + 1, accepted + a, left - a - 1
        self.drafts, self.drafted = self.drafts + steps, self.drafted + steps * self.k
        self.accepted += accepted
        if steps:
            self.last_length, self.last_rate = 1 + accepted / steps, accepted / (steps * self.k)
        return {
            "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / (steps * self.k) if steps else 0.0,
            "acceptance_histogram": histogram,
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": steps * self.k,
            "num_spec_tokens": self.k,
        }

    def exposition(self, flavor: str) -> list[str]:
        if flavor == "sglang":
            return [
                f'sglang:spec_accept_length{{model_name="m"}} {self.last_length}',
                f'sglang:spec_accept_rate{{model_name="m"}} {self.last_rate}',
            ]
        lab = 'engine="0",model_name="m"'
        return [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            f"vllm:spec_decode_num_drafts_total{{{lab}}} {self.drafts}.0",
            f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {self.drafted}.0",
            f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {self.accepted}.0",
            *(
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {v}.0'
                for i, v in enumerate(self.per_pos)
            ),
        ]


def _chunk(chat: bool, text: str, *, role: bool = False, finish: bool = False) -> dict:
    if chat:
        delta = {"role": "assistant", "content": ""} if role else {"content": text}
        choice = {"index": 0, "delta": delta, "finish_reason": "length" if finish else None}
    else:
        choice = {"index": 0, "text": text, "finish_reason": "length" if finish else None}
    return {"id": "x", "object": "chunk", "choices": [choice]}


def _message_text(m: dict) -> str:
    """A message's text and its tool calls' names and arguments (tools-shaped chat)."""
    calls = [
        f"{c['function']['name']} {c['function']['arguments']}" for c in m.get("tool_calls") or ()
    ]
    return " ".join([_text(m.get("content") or ""), *calls])


def _text(content) -> str:
    """A message's text: a string, or OpenAI content parts (`[{"type": "text", "text": ...}]`)."""
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content if isinstance(p, dict))


def _event(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _serve(port: int, config: ServerConfig) -> None:
    server = SSETestServer(config)
    await server.start(port)
    print(f"PORT {server.port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token-delay", type=float, default=0.0)
    ap.add_argument("--no-body", action="store_true", help="do not keep request bodies in the log")
    ap.add_argument("--no-prefix-cache", action="store_true")
    ap.add_argument("--max-output", type=int, help="stream at most this many tokens per request")
    ap.add_argument(
        "--uvloop", action="store_true", help="serve on uvloop (it batches writes per loop turn)"
    )
    a = ap.parse_args()
    cfg = ServerConfig(
        token_delay=a.token_delay,
        keep_body=not a.no_body,
        prefix_cache=not a.no_prefix_cache,
        max_output=a.max_output,
    )
    if a.uvloop:
        import uvloop

        uvloop.install()
    asyncio.run(_serve(a.port, cfg))
