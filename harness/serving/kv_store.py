"""`harness kv-store`: a KV block store that engine replicas share, over HTTP on loopback.

As Mooncake Store or an LMCache server does for vLLM: replicas put full KV blocks, keyed by the
prefix cache's hash chain (so equal prefixes have equal keys on every replica), and fetch the run
of a request's next blocks they miss. The store is an LRU of `capacity` blocks in memory.

    POST /put     records (key, token ids, KV bytes): stored, newest last in the LRU
    POST /get     records with keys only: the longest leading run the store holds, in full
    POST /has     records with keys only: that run's length (4 bytes, little-endian)
    GET  /health  /metrics (Prometheus: blocks, bytes, puts, gets, hits, misses)

The records' wire format is `harness.engine.tiers.remote.pack`, the client's.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from aiohttp import web

from harness.engine.tiers.remote import Record, pack, unpack


@dataclass
class BlockStore:
    capacity: int
    blocks: OrderedDict[bytes, tuple[bytes, bytes]] = field(default_factory=OrderedDict)
    bytes_held: int = 0
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("put_blocks", "put_bytes", "get_requests", "hit_blocks", "hit_bytes", "evicted"), 0
        )
    )

    def put(self, records: list[Record]) -> None:
        for key, tokens, data in records:
            old = self.blocks.pop(key, None)
            self.bytes_held -= len(old[1]) if old else 0
            self.blocks[key] = (tokens, data)
            self.bytes_held += len(data)
            self.counts["put_blocks"] += 1
            self.counts["put_bytes"] += len(data)
        while len(self.blocks) > self.capacity:
            _, (_, data) = self.blocks.popitem(last=False)
            self.bytes_held -= len(data)
            self.counts["evicted"] += 1

    def run(self, keys: list[bytes]) -> list[Record]:
        """The leading run of `keys` held (each refreshed in the LRU)."""
        out = []
        for key in keys:
            block = self.blocks.get(key)
            if block is None:
                break
            self.blocks.move_to_end(key)
            out.append((key, *block))
        self.counts["get_requests"] += 1
        self.counts["hit_blocks"] += len(out)
        self.counts["hit_bytes"] += sum(len(r[2]) for r in out)
        return out

    def metrics(self) -> str:
        lines = [
            f"harness_kv_store:blocks {len(self.blocks)}",
            f"harness_kv_store:bytes {self.bytes_held}",
            f"harness_kv_store:capacity_blocks {self.capacity}",
        ]
        lines += [f"harness_kv_store:{name}_total {n}" for name, n in self.counts.items()]
        return "\n".join(lines) + "\n"


STORE_KEY = web.AppKey("store", BlockStore)


async def _records(request: web.Request) -> list[Record]:
    try:
        return list(unpack(await request.read()))
    except ValueError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from exc


async def _put(request: web.Request) -> web.Response:
    request.app[STORE_KEY].put(await _records(request))
    return web.Response(body=b"")


async def _get(request: web.Request) -> web.Response:
    keys = [k for k, _, _ in await _records(request)]
    return web.Response(body=pack(request.app[STORE_KEY].run(keys)))


async def _has(request: web.Request) -> web.Response:
    keys = [k for k, _, _ in await _records(request)]
    store = request.app[STORE_KEY]
    n = next((i for i, k in enumerate(keys) if k not in store.blocks), len(keys))
    return web.Response(body=n.to_bytes(4, "little"))


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _metrics(request: web.Request) -> web.Response:
    return web.Response(text=request.app[STORE_KEY].metrics(), content_type="text/plain")


def make_app(capacity: int) -> web.Application:
    app = web.Application(client_max_size=2**31)  # a long prompt's blocks in one request
    app[STORE_KEY] = BlockStore(capacity)
    app.router.add_post("/put", _put)
    app.router.add_post("/get", _get)
    app.router.add_post("/has", _has)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    return app


async def start_store(host: str, port: int, capacity: int) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(make_app(capacity), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, f"http://{host}:{bound}"


def serve_store(host: str, port: int, capacity: int, *, announce=print) -> None:
    """Block until SIGINT/SIGTERM; `announce` gets "kv store on URL" once it listens."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        runner, url = await start_store(host, port, capacity)
        try:
            announce(f"kv store on {url}")
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())


class BackgroundStore:
    """A store on its own event loop in a daemon thread (tests): `with BackgroundStore() as url`."""

    def __init__(self, capacity: int = 1_048_576) -> None:
        self.capacity = capacity
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> str:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(
            start_store("127.0.0.1", 0, self.capacity), self._loop
        )
        self._runner, url = fut.result(timeout=30)
        return url

    @property
    def store(self) -> BlockStore:
        assert self._runner is not None
        return self._runner.app[STORE_KEY]

    def __exit__(self, *exc) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
