"""The reference server's aiohttp application: its routes and what each one answers.

    POST /v1/completions       prompt: text, token ids, or a batch of one of either
    POST /v1/chat/completions  messages, rendered by `chat_template`
    POST /v1/messages          Anthropic Messages, answered as the chat request it stands for
    POST /v1/responses         OpenAI Responses, likewise
    POST /v1beta/models/{model}:streamGenerateContent (or :generateContent)  Gemini, likewise
    GET  /v1/models  /v1beta/models (Gemini's list)  /health  /metrics  /version

Streaming is Server-Sent Events (`data: {...}` chunks, `data: [DONE]`), as OpenAI and vLLM send it;
a request that does not ask to stream gets its API's one JSON body (`agent_streams`'s `whole`).
Every response reports `usage.prompt_tokens_details.cached_tokens`; `cached_tokens_device`,
`_cpu`, `_disk` and `_remote` beside it split it by cache tier, and a request with SGLang's
`return_cached_tokens_details: true` also gets SGLang's `sglext.cached_tokens_details`. A client
that disconnects aborts its request: the handler is cancelled (`handler_cancellation=True`, set
where server.py runs the application) and closing the engine's output iterator aborts the
request in the engine.

harness/serving/server.py binds and runs this application (a port, signals, a background thread).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import orjson
from aiohttp import web

from harness import __version__
from harness.engine.config import EngineConfig
from harness.errors import EngineError
from harness.serving import exposition
from harness.serving.agent_requests import (
    gemini_chat_body,
    messages_chat_body,
    responses_chat_body,
)
from harness.serving.agent_streams import (
    ChatFraming,
    GeminiFraming,
    MessagesFraming,
    ResponsesFraming,
)
from harness.serving.async_engine import AsyncEngine, EngineRequestError, RequestOutput
from harness.serving.protocol import (
    ApiError,
    ApiRequest,
    ServedModel,
    parse_chat,
    parse_completion,
    parse_json,
)
from harness.serving.responses import ResponseBuilder
from harness.serving.tokenizer import Tokenizer, tokenizer_for

log = logging.getLogger(__name__)


@dataclass
class ServerState:
    model: ServedModel
    tokenizer: Tokenizer
    metrics: exposition.ServerMetrics
    started: float  # unix time, for "created" fields only
    ready: bool = True  # False while the engine is still being built
    storage_backend: str | None = None  # SGLang's L3 name for the disk tier / shared store


ENGINE_KEY = web.AppKey("engine", AsyncEngine)
STATE_KEY = web.AppKey("state", ServerState)


@web.middleware
async def _openai_errors(request: web.Request, handler) -> web.StreamResponse:
    """Every error leaves as an OpenAI-style JSON body with the right status."""
    try:
        return await handler(request)
    except ApiError as exc:
        return web.json_response(exc.body(), status=exc.status, dumps=_dumps)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = f"{exc.reason}: {request.method} {request.path}"
        err = ApiError(exc.status, message, code="not_found" if exc.status == 404 else None)
        return web.json_response(err.body(), status=exc.status, dumps=_dumps)
    except Exception as exc:  # a bug of ours: answer 500 and keep serving
        log.exception("internal error on %s %s", request.method, request.path)
        err = ApiError(500, f"internal server error: {type(exc).__name__}", type="server_error")
        return web.json_response(err.body(), status=500, dumps=_dumps)


def _dumps(obj: object) -> str:
    return orjson.dumps(obj).decode()


def build_app(engine: AsyncEngine, *, ready: bool = True) -> web.Application:
    app = web.Application(middlewares=[_openai_errors], client_max_size=256 * 2**20)
    app[ENGINE_KEY] = engine
    app[STATE_KEY] = ServerState(
        model=ServedModel(
            engine.config.served_model_name,
            engine.max_model_len,
            engine.vocab_size,
            engine.config.total_blocks * engine.config.block_size,
        ),
        tokenizer=tokenizer_for(engine.config),
        storage_backend=_storage_backend(engine.config),
        metrics=exposition.ServerMetrics(),
        started=time.time(),
        ready=ready,
    )
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _chat_completions)
    app.router.add_post("/v1/messages", _messages)
    app.router.add_post("/v1/responses", _responses)
    app.router.add_post("/v1beta/models/{target}", _gemini)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/v1beta/models", _gemini_models)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/version", _version)
    return app


async def _completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    body = parse_json(await request.read())
    return await _generate(request, parse_completion(body, state.model, state.tokenizer))


async def _chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    body = parse_json(await request.read())
    return await _generate(request, parse_chat(body, state.model, state.tokenizer))


async def _messages(request: web.Request) -> web.StreamResponse:
    """Anthropic Messages, answered as the chat request it stands for (agent_requests.py)."""
    state = request.app[STATE_KEY]
    body = messages_chat_body(parse_json(await request.read()))
    return await _generate(request, parse_chat(body, state.model, state.tokenizer), MessagesFraming)


async def _responses(request: web.Request) -> web.StreamResponse:
    """OpenAI Responses, answered as the chat request it stands for (agent_requests.py)."""
    state = request.app[STATE_KEY]
    body = responses_chat_body(parse_json(await request.read()))
    return await _generate(
        request, parse_chat(body, state.model, state.tokenizer), ResponsesFraming
    )


async def _gemini(request: web.Request) -> web.StreamResponse:
    """Gemini's `{model}:streamGenerateContent` (or `:generateContent`), answered as the chat
    request it stands for (agent_requests.py)."""
    state = request.app[STATE_KEY]
    model, _, method = request.match_info["target"].partition(":")
    if method not in ("streamGenerateContent", "generateContent"):
        raise ApiError(
            404, f"{method!r}: this server answers streamGenerateContent, generateContent"
        )
    stream = method == "streamGenerateContent"
    body = gemini_chat_body(parse_json(await request.read()), model, stream)
    return await _generate(request, parse_chat(body, state.model, state.tokenizer), GeminiFraming)


async def _generate(
    request: web.Request, api: ApiRequest, framing: type[ChatFraming] = ChatFraming
) -> web.StreamResponse:
    engine, state = request.app[ENGINE_KEY], request.app[STATE_KEY]
    # the engine's id is always unique; a client's X-Request-Id only names the response
    engine_id = f"{'chatcmpl' if api.chat else 'cmpl'}-{uuid.uuid4().hex}"
    response_id = request.headers.get("X-Request-Id", engine_id)[:256]
    t0 = time.perf_counter()
    outputs = _submit(engine, engine_id, api)
    build = ResponseBuilder(
        response_id, api, state.model.name, state.tokenizer, storage_backend=state.storage_backend
    )
    try:
        if api.stream:
            return await _stream(request, framing(build), outputs, state, t0)
        async for out in outputs:
            _observe_first(state, build, t0)
            build.add(out)
            if build.stopped:
                break  # a stop string: closing the outputs below aborts the rest in the engine
        failure = _failure(build.last)
        if failure is not None:
            raise failure
        return web.json_response(
            framing(build).whole(), dumps=_dumps, headers={"X-Request-Id": build.request_id}
        )
    finally:
        await outputs.aclose()  # aborts the request in the engine if it is still running
        _request_done(state, build, t0)


def _submit(
    engine: AsyncEngine, request_id: str, api: ApiRequest
) -> AsyncGenerator[RequestOutput, None]:
    """Hand the request to the engine, which validates it before anything is sent."""
    try:
        return engine.generate(request_id, api.prompt_ids, api.params)
    except EngineRequestError as exc:
        raise ApiError(400, str(exc)) from exc
    except EngineError as exc:  # stopping
        raise ApiError(503, str(exc), type="server_error") from exc


def _failure(out: RequestOutput | None) -> ApiError | None:
    if out is None:
        return ApiError(500, "the engine ended the request without any output", type="server_error")
    if out.finish_reason == "error":
        return ApiError(500, f"the engine failed this request: {out.error}", type="server_error")
    if out.finish_reason == "abort":
        return ApiError(
            503, "the request was aborted: the engine is shutting down", type="server_error"
        )
    return None


def _observe_first(state: ServerState, build: ResponseBuilder, t0: float) -> None:
    if build.last is None:
        state.metrics.ttft.observe(time.perf_counter() - t0)


async def _stream(request, framing: ChatFraming, outputs, state, t0) -> web.StreamResponse:
    # Headers go out at once, as vLLM's do, so a long queue wait never looks like a dead server;
    # the engine has validated the request already, so a bad one never gets here.
    build = framing.build
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Request-Id": build.request_id,
        }
    )
    await resp.prepare(request)
    try:
        for chunk in framing.opening():
            await resp.write(chunk)
        async for out in outputs:
            _observe_first(state, build, t0)
            for chunk in framing.output(out):
                await resp.write(chunk)
            if build.stopped:
                break
        failure = _failure(build.last)
        for chunk in framing.closing() if failure is None else framing.failure(failure):
            await resp.write(chunk)
        await resp.write_eof()
    except ConnectionError as exc:
        log.info("client went away from %s: %s", build.request_id, exc)  # finally aborts it
    return resp


def _request_done(state: ServerState, build: ResponseBuilder, t0: float) -> None:
    out = build.last
    reason = build.finish_reason if build.done else "abort"  # not done: the client went away
    state.metrics.request_done(reason or "abort", out, time.perf_counter() - t0)


def _storage_backend(c: EngineConfig) -> str | None:
    names = [n for n, on in (("file", c.disk_offload_blocks), ("kv-store", c.kv_store)) if on]
    return "+".join(names) or None


async def _models(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    card = {
        "id": state.model.name,
        "object": "model",
        "created": int(state.started),
        "owned_by": "agentic-harness",
        "root": state.model.name,
        "parent": None,
        "max_model_len": state.model.max_model_len,
        # not in OpenAI's card: what makes the timings (a simulated runner's are a cost model's)
        "metadata": request.app[ENGINE_KEY].identity(),
    }
    return web.json_response({"object": "list", "data": [card]}, dumps=_dumps)


async def _gemini_models(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    card = {"name": f"models/{state.model.name}", "inputTokenLimit": state.model.max_model_len,
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent"]}  # fmt: skip
    return web.json_response({"models": [card]}, dumps=_dumps)


def _check_ready(state: ServerState) -> None:
    if not state.ready:
        raise ApiError(503, "the engine is starting", type="server_error")


async def _health(request: web.Request) -> web.Response:
    _check_ready(request.app[STATE_KEY])
    return web.Response(status=200)


async def _metrics(request: web.Request) -> web.Response:
    engine, state = request.app[ENGINE_KEY], request.app[STATE_KEY]
    _check_ready(state)
    text = exposition.render(
        engine.stats(),
        state.metrics,
        state.model.name,
        block_size=engine.config.block_size,
        identity=engine.identity(),
        num_gpu_blocks=engine.config.total_blocks,
    )
    return web.Response(
        text=text,
        content_type="text/plain",
        charset="utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )


async def _version(request: web.Request) -> web.Response:
    identity = request.app[ENGINE_KEY].identity()
    return web.json_response({"version": __version__, "engine": "reference", **identity})
