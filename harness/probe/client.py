"""The probe's one connection to a server: token-id prompts to `/v1/completions`, one at a time.

Each prompt is sent streamed with `max_tokens: 1` and usage requested, so its time to first
token is its prefill and its usage says how many prompt tokens the server served from its cache
(`usage.prompt_tokens_details.cached_tokens`, null when the server does not say). What the server
advertises comes from `/v1/models` (`max_model_len`) and `/metrics` (vLLM's
`vllm:cache_config_info` labels `block_size` and `num_gpu_blocks`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import aiohttp
import orjson

from harness.driver.http import SSEParser
from harness.errors import HarnessError, InputError
from harness.prometheus import parse_prometheus


class ProbeError(HarnessError):
    """The server refused or broke a probe request."""


@dataclass(frozen=True)
class Reply:
    ttft_s: float
    prompt_tokens: int | None
    cached_tokens: int | None


@dataclass(frozen=True)
class Advertised:
    max_model_len: int | None
    block_size: int | None
    pool_tokens: int | None  # num_gpu_blocks x block_size
    source: str | None  # where pool_tokens came from


class ProbeClient:
    def __init__(self, endpoint: str, model: str, timeout_s: float = 600.0) -> None:
        self.base = endpoint.rstrip("/")
        self.root = self.base.removesuffix("/v1")
        self.model = model
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=10)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ProbeClient:
        connector = aiohttp.TCPConnector(limit=2)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use `async with ProbeClient(...)`"
        return self._session

    async def send(self, prompt: list[int]) -> Reply:
        """One prompt, one output token: its TTFT and what the server says it cached."""
        body = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        start = time.perf_counter()
        first: float | None = None
        usage: dict | None = None
        try:
            async with self.session.post(f"{self.base}/completions", json=body) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:300]
                    raise ProbeError(f"{self.base}/completions: HTTP {resp.status}: {text}")
                parser = SSEParser()
                async for chunk in resp.content.iter_any():
                    for data in parser.feed(chunk):
                        if data == b"[DONE]":
                            continue
                        event = orjson.loads(data)
                        if first is None and event.get("choices"):
                            first = time.perf_counter()
                        usage = event.get("usage") or usage
        except aiohttp.ClientError as exc:
            raise ProbeError(f"{self.base}/completions: {type(exc).__name__}: {exc}") from exc
        end = time.perf_counter()
        return Reply((first or end) - start, *_usage(usage))

    async def advertised(self) -> Advertised:
        """What the server says about itself; missing parts are None."""
        max_len = None
        try:
            async with self.session.get(f"{self.base}/models") as resp:
                if resp.status == 200:
                    cards = (await resp.json()).get("data") or []
                    card = next((c for c in cards if c.get("id") == self.model), None)
                    max_len = (card or {}).get("max_model_len")
                    if cards and card is None:
                        names = ", ".join(str(c.get("id")) for c in cards)
                        raise InputError(
                            f"model {self.model!r} not served (serves {names})", field="--model"
                        )
        except aiohttp.ClientError as exc:
            raise ProbeError(f"{self.base}/models: cannot reach the server ({exc})") from exc
        block, blocks, tokens = await self._cache_config()
        if tokens:  # vLLM's own count (a hybrid model's pages hold more than one block's tokens)
            return Advertised(max_len, block, tokens, "/metrics kv_cache_size_tokens")
        pool = block * blocks if block and blocks else None
        source = "/metrics num_gpu_blocks x block_size" if pool else None
        return Advertised(max_len, block, pool, source)

    async def _cache_config(self) -> tuple[int | None, int | None, int | None]:
        """vLLM's `cache_config_info` labels: block_size, num_gpu_blocks, kv_cache_size_tokens."""
        try:
            async with self.session.get(f"{self.root}/metrics") as resp:
                if resp.status != 200:
                    return None, None, None
                text = await resp.text()
        except aiohttp.ClientError:
            return None, None, None
        for name, labels, _ in parse_prometheus(text):
            if name == "vllm:cache_config_info":
                keys = ("block_size", "num_gpu_blocks", "kv_cache_size_tokens")
                block, blocks, tokens = (_int(labels.get(k)) for k in keys)
                return block, blocks, tokens
        return None, None, None


def _usage(usage: dict | None) -> tuple[int | None, int | None]:
    if not usage:
        return None, None
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    return usage.get("prompt_tokens"), cached if isinstance(cached, int) else None


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
