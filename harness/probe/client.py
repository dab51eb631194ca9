"""The probe's one connection to a server: token-id prompts to the completions API, one at a time,
through the harness's one HTTP client (the same endpoint forms, proxy and trust as a replay).

Each prompt is sent streamed with `max_tokens: 1` and usage requested, so its time to first
token is its prefill and its usage says how many prompt tokens the server served from its cache
(`usage.prompt_tokens_details.cached_tokens`, null when the server does not say). What the server
advertises comes from `/v1/models` (`max_model_len`) and `/metrics` (vLLM's
`vllm:cache_config_info` labels `block_size` and `num_gpu_blocks`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson

from harness.driver.endpoint import shown
from harness.driver.http import (
    HTTPClient,
    Network,
    NetworkSettings,
    SSEParser,
    WireError,
    endpoint_url,
    metrics_url,
)
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
    def __init__(
        self,
        endpoint: str,
        model: str,
        timeout_s: float = 600.0,
        network: NetworkSettings | None = None,
    ) -> None:
        self.base = endpoint
        self.model = model
        self._url = endpoint_url(endpoint, "completions")
        self._http = HTTPClient(Network(network or NetworkSettings()), timeout=timeout_s)

    async def __aenter__(self) -> ProbeClient:
        return self

    async def __aexit__(self, *exc) -> None:
        self._http.close()

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
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        start = time.perf_counter()
        first: float | None = None
        usage: dict | None = None
        where = shown(self._url)
        try:
            resp = await self._http.request("POST", self._url, headers, orjson.dumps(body))
            if resp.status != 200:
                text = (await resp.read()).decode("utf-8", "replace")[:300]
                raise ProbeError(f"{where}: HTTP {resp.status}: {text}")
            parser = SSEParser()
            async for chunk in resp:
                for data in parser.feed(chunk):
                    if data == b"[DONE]":
                        continue
                    event = orjson.loads(data)
                    if first is None and event.get("choices"):
                        first = time.perf_counter()
                    usage = event.get("usage") or usage
            if resp.error is not None:
                raise resp.error
        except WireError as exc:
            raise ProbeError(f"{where}: {exc.error_class}: {exc}") from exc
        end = time.perf_counter()
        return Reply((first or end) - start, *_usage(usage))

    async def advertised(self) -> Advertised:
        """What the server says about itself; missing parts are None."""
        max_len = None
        url = endpoint_url(self.base, "completions", "/models")
        try:
            status, body = await self._http.get(url)
        except WireError as exc:
            raise ProbeError(f"{shown(url)}: cannot reach the server ({exc})") from exc
        if status == 200:
            cards = orjson.loads(body).get("data") or []
            card = next((c for c in cards if c.get("id") == self.model), None)
            max_len = (card or {}).get("max_model_len")
            if cards and card is None:
                names = ", ".join(str(c.get("id")) for c in cards)
                raise InputError(
                    f"model {self.model!r} not served (serves {names})", field="--model"
                )
        block, blocks, tokens = await self._cache_config()
        if tokens:  # vLLM's own count (a hybrid model's pages hold more than one block's tokens)
            return Advertised(max_len, block, tokens, "/metrics kv_cache_size_tokens")
        pool = block * blocks if block and blocks else None
        source = "/metrics num_gpu_blocks x block_size" if pool else None
        return Advertised(max_len, block, pool, source)

    async def _cache_config(self) -> tuple[int | None, int | None, int | None]:
        """vLLM's `cache_config_info` labels: block_size, num_gpu_blocks, kv_cache_size_tokens."""
        try:
            status, body = await self._http.get(metrics_url(self.base))
        except WireError:
            return None, None, None
        if status != 200:
            return None, None, None
        for name, labels, _ in parse_prometheus(body.decode("utf-8", "replace")):
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
