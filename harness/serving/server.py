"""An OpenAI-compatible HTTP server around the reference engine: bound, started and stopped.

    POST /v1/completions  /v1/chat/completions  /v1/messages  /v1/responses
    GET  /v1/models  /health  /metrics  /version

What each route answers (parsing, streaming, errors) is the application in
harness/serving/routes.py; this module binds it to a port first (a busy port fails at once),
builds the engine behind it (/health is 503 until then), and runs it until a signal, or on a
background thread for synchronous callers (tests, notebooks).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from dataclasses import dataclass

from aiohttp import web

from harness.engine.config import EngineConfig
from harness.errors import EngineError
from harness.serving.async_engine import AsyncEngine
from harness.serving.routes import STATE_KEY, build_app


@dataclass
class RunningServer:
    url: str
    port: int
    engine: AsyncEngine
    _runner: web.AppRunner
    _owns_engine: bool = False

    async def close(self) -> None:
        if self._owns_engine:
            # stop the engine first: it aborts in-flight requests, so open streams end promptly
            await self.engine.stop()
        await self._runner.cleanup()


async def start_server(
    engine_config: EngineConfig, host: str = "127.0.0.1", port: int = 0
) -> RunningServer:
    """Bind first (a busy port fails at once), then build the engine; /health is 503 until then."""
    engine = AsyncEngine(engine_config)
    server = await serve_engine(engine, host, port, ready=False)
    server._owns_engine = True
    try:
        await engine.start()
    except BaseException:
        await server.close()
        raise
    server._runner.app[STATE_KEY].ready = True
    return server


async def serve_engine(
    engine: AsyncEngine, host: str = "127.0.0.1", port: int = 0, *, ready: bool = True
) -> RunningServer:
    """Serve an engine the caller started (and keeps ownership of)."""
    runner = web.AppRunner(
        build_app(engine, ready=ready), handler_cancellation=True, access_log=None
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise EngineError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    bound = runner.addresses[0][1]
    shown = f"[{host}]" if ":" in host else host
    return RunningServer(url=f"http://{shown}:{bound}", port=bound, engine=engine, _runner=runner)


def serve(
    engine_config: EngineConfig, host: str = "127.0.0.1", port: int = 0, *, announce=print
) -> None:
    """Block until SIGINT/SIGTERM; `announce` gets "serving on URL" once the server is ready."""
    asyncio.run(_serve_until_signal(engine_config, host, port, announce))


async def _serve_until_signal(engine_config, host, port, announce) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await start_server(engine_config, host, port)
    try:
        c = engine_config
        print(
            f"engine: {c.runner} runner, preset {c.preset}, device {c.device}, {c.total_blocks} KV blocks x "
            f"{c.block_size} tokens, max_model_len {c.model_len}, prefix caching "
            f"{'on' if c.enable_prefix_caching else 'off'}, model '{c.served_model_name}'",
            file=sys.stderr,
        )
        announce(f"serving on {server.url}")
        await stop.wait()
    finally:
        await server.close()


class BackgroundServer:
    """A server on its own event loop in a daemon thread, for synchronous callers (tests,
    notebooks): `with BackgroundServer(config) as server: server.url`."""

    def __init__(self, engine_config: EngineConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self._args = (engine_config, host, port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="harness-server", daemon=True
        )
        self.server: RunningServer | None = None

    def __enter__(self) -> RunningServer:
        self._thread.start()
        try:
            self.server = self.call(start_server(*self._args))
        except BaseException:
            self._stop_loop()
            raise
        return self.server

    def __exit__(self, *exc) -> None:
        try:
            if self.server is not None:
                self.call(self.server.close())
        finally:
            self._stop_loop()

    def call(self, coro, timeout: float | None = 120.0):
        """Run a coroutine on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
