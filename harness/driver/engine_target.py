"""The reference engine as a driver Target, in-process: no HTTP between driver and engine.

The engine's step loop runs in its own thread (see `AsyncEngine`), so the driver's clock is
stamped on the event loop exactly as for an HTTP target. Prompts go through the same tokenizer
and chat template as the HTTP server, so an in-process run and a served run see the same tokens.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import cast

import numpy as np

from harness.driver import clock
from harness.driver.target import Done, Failure, RequestSpec, Sink, Usage
from harness.engine.config import EngineConfig
from harness.engine.tiers.stack import TIERS as CACHE_TIERS
from harness.errors import ChatTemplateError, EngineError
from harness.serving.async_engine import (
    AsyncEngine,
    EngineRequestError,
    RequestOutput,
    SamplingParams,
)
from harness.serving.chat_template import chat_prompt_ids
from harness.serving.tokenizer import tokenizer_for
from harness.serving.virtual_engine import VirtualEngine


class EngineTarget:
    name = "engine"

    def __init__(
        self,
        config: EngineConfig,
        *,
        replicas: int = 1,
        ignore_eos: bool = True,
        temperature: float | None = 0.0,
    ) -> None:
        if replicas < 1:
            raise EngineError(f"replicas must be >= 1, got {replicas}")
        self.config = config
        # Replicas are independent engines (own KV cache each); the driver's router picks one.
        kind = VirtualEngine if config.clock == "virtual" else AsyncEngine
        self.engines = [kind(config) for _ in range(replicas)]
        self.tokenizer = tokenizer_for(config)
        self.ignore_eos = ignore_eos
        self.temperature = 0.0 if temperature is None else temperature  # the engine's default: 0
        self.endpoints: Sequence[str] = tuple(
            "inprocess" if replicas == 1 else f"inprocess-{i}" for i in range(replicas)
        )

    @property
    def engine(self) -> AsyncEngine:
        return self.engines[0]

    async def start(self) -> None:
        for engine in self.engines:
            await engine.start()

    async def close(self) -> None:
        for engine in self.engines:
            await engine.stop()

    def describe(self) -> dict:
        return {
            "kind": "engine-inprocess",
            "model": self.config.served_model_name,
            "replicas": len(self.engines),
            "simulated": self.engine.simulated,
            **{
                k: v
                for k, v in self.engine.identity().items()
                if k in ("runner", "device", "modelled_device")
            },
            "engine": _config_dict(self.config),
            # the engine samples by temperature only (top_p, top_k, seed: not implemented)
            "sampling": {
                "temperature": self.temperature,
                "sent": {"temperature": self.temperature},
            },
        }

    def _prompt_ids(self, req: RequestSpec) -> list[int] | np.ndarray:
        if req.messages is not None:
            return chat_prompt_ids(req.messages, self.tokenizer, tools=req.tools)
        if isinstance(req.prompt, str):
            return self.tokenizer.encode(req.prompt)
        if isinstance(req.prompt, np.ndarray):  # token-id prompts (harness.trace.requests):
            return req.prompt  # as they are; the engine copies them when it takes the request
        return list(req.prompt or ())

    async def stream(self, req: RequestSpec, sink: Sink) -> None:
        params = SamplingParams(
            max_tokens=req.max_tokens,
            min_tokens=req.max_tokens if self.ignore_eos else 0,
            ignore_eos=self.ignore_eos,
            temperature=self.temperature,
        )
        try:
            engine = self.engines[req.endpoint % len(self.engines)]
            ids = cast(list[int], self._prompt_ids(req))  # an array is taken too (generate)
            if isinstance(engine, VirtualEngine) and not req.want_text:
                outputs = engine.generate(req.request_id, ids, params, _chunker(sink))
            else:
                outputs = engine.generate(req.request_id, ids, params)
        except (EngineRequestError, ChatTemplateError) as exc:
            sink.event(Failure(clock.now(), "error", "BadRequest", str(exc)))
            return
        except EngineError as exc:
            sink.event(Failure(clock.now(), "error", "EngineUnavailable", str(exc)))
            return
        try:
            await self._relay(outputs, sink, req.want_text)
        finally:
            await cast(AsyncGenerator, outputs).aclose()  # generate() is an async generator

    async def _relay(self, outputs, sink: Sink, want_text: bool) -> None:
        """The engine's outputs as they come, each stamped when the event loop got it; their
        text only when the driver wants it (a live history), as the HTTP target does."""
        detok = self.tokenizer.decode_stream() if want_text else None
        async for out in outputs:
            now = clock.now()
            if out.new_token_ids:
                text = "".join(detok.push(i) for i in out.new_token_ids) if detok else ""
                sink.chunk(now, len(out.new_token_ids), text)
            if out.finished:
                if out.finish_reason in ("error", "abort"):
                    reason = f"Engine{out.finish_reason.title()}"
                    sink.event(Failure(now, "error", reason, out.error or out.finish_reason))
                    return
                tiers = {t: getattr(out, f"cached_tokens_{t}") for t in CACHE_TIERS}
                sink.event(
                    Usage(out.prompt_tokens, out.completion_tokens, out.cached_tokens, tiers)
                )
                sink.event(Done(now))
                return


def _chunker(sink: Sink) -> Callable[[RequestOutput], None]:
    """A virtual engine's outputs before the last, straight into the sink as `_relay` would
    put them (stamped on the loop's clock, which has not moved since the step ended)."""
    chunk = sink.chunk

    def on_output(out: RequestOutput) -> None:
        if out.new_token_ids:
            chunk(clock.now(), len(out.new_token_ids), "")

    return on_output


def _config_dict(config: EngineConfig) -> dict:
    from dataclasses import asdict, is_dataclass

    if is_dataclass(config):
        return {k: v for k, v in asdict(config).items() if not k.startswith("_")}
    return {}
