"""A recording from start to stop: the proxy listening, the writer behind it, the way out.

`record` blocks until SIGINT or SIGTERM (Ctrl-C): the proxy stops taking requests, the ones in
flight get `GRACE_S` to end, and the writer writes trace.jsonl and recording.json whole.
`BackgroundRecorder` runs the same on a thread of its own, for tests and notebooks.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from harness.driver.replay_into import event_loop_factory
from harness.errors import InputError
from harness.record.proxy import Proxy
from harness.record.recording import Settings
from harness.record.standins import StandIns
from harness.record.writer import WriterProcess

GRACE_S = 10.0  # how long requests still in flight at the stop may take to end


@dataclass
class Recording:
    """What `harness record` was asked for."""

    upstream: str
    folder: Path
    standins: StandIns
    settings: Settings
    host: str = "127.0.0.1"
    port: int = 0


class Recorder:
    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self.writer: WriterProcess | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        """Listen (a busy port fails at once); returns the proxy's URL."""
        self.writer = WriterProcess(self.rec.folder, self.rec.standins, self.rec.settings)
        await asyncio.to_thread(self.writer.wait_ready)
        proxy = Proxy(self.rec.upstream, self.writer.sink)
        self._runner = web.AppRunner(proxy.app(), access_log=None, shutdown_timeout=GRACE_S)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.rec.host, self.rec.port).start()
        except OSError as exc:
            await self._runner.cleanup()
            self.writer.close()
            where = f"{self.rec.host}:{self.rec.port}"
            raise InputError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
        port = self._runner.addresses[0][1]
        host = f"[{self.rec.host}]" if ":" in self.rec.host else self.rec.host
        self.url = f"http://{host}:{port}"
        self.rec.settings.listen = f"{host}:{port}"
        return self.url

    async def stop(self) -> None:
        """Stop listening, let what is in flight end, write the folder's files."""
        if self._runner is not None:
            await self._runner.cleanup()
        if self.writer is not None:
            await asyncio.to_thread(self.writer.close)


def record(rec: Recording, announce: Callable[[str], None] = print) -> None:
    """Record until SIGINT or SIGTERM, on uvloop when installed (as a run measures)."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(_until_signal(rec, announce))


async def _until_signal(rec: Recording, announce: Callable[[str], None]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    recorder = Recorder(rec)
    url = await recorder.start()
    try:
        announce(url)
        await stop.wait()
    finally:
        await recorder.stop()


class BackgroundRecorder:
    """`with BackgroundRecorder(rec) as url:` a recording on its own event loop and thread."""

    def __init__(self, rec: Recording) -> None:
        self.recorder = Recorder(rec)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="record", daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        return self._call(self.recorder.start())

    def __exit__(self, *exc) -> None:
        try:
            self._call(self.recorder.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(120)
