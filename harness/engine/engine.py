"""The synchronous engine: validate and add requests, `step()` until they finish.

One step = schedule (block pool + scheduler) -> execute (runner) -> update (append tokens, cache
full blocks, finish). `AsyncEngine` runs this loop in a thread; tests drive it directly.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from harness.engine.block_pool import BlockPool
from harness.engine.config import FULL, SLIDING, EngineConfig
from harness.engine.runners.simulated import SimRunner
from harness.engine.scheduler import ScheduledChunk, Scheduler
from harness.engine.sequence import Request, SamplingParams
from harness.engine.tiers.setup import make_tiers, tier_stats
from harness.engine.tiers.stack import KVTiers
from harness.errors import EngineError


class EngineRequestError(EngineError):
    """An invalid request (too long, id outside the vocabulary, bad params): a 400, not a crash."""


@dataclass
class RequestOutput:  # one per engine step that produced tokens for the request, + final
    request_id: str
    new_token_ids: list[int]
    finished: bool
    finish_reason: str | None  # "length" | "stop" | "abort" | "error"
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  # every tier, set at first admission (vLLM semantics)
    cached_tokens_device: int  # ... split by the tier the KV came from
    cached_tokens_cpu: int
    first_scheduled_at: float | None  # perf_counter, for the server's own logs
    error: str | None = None
    cached_tokens_disk: int = 0
    cached_tokens_remote: int = 0


@dataclass(frozen=True)
class EngineStats:
    num_running: int
    num_waiting: int
    kv_cache_usage: float  # 0..1 of device blocks in use
    prefix_cache_queries: int  # tokens, vLLM semantics
    prefix_cache_hits: int
    cpu_cache_hits: int
    num_preemptions: int
    prompt_tokens_total: int
    generation_tokens_total: int
    num_steps: int
    requests_finished: int
    kv_blocks_full: int = 0  # device pages held by requests, full-attention groups
    kv_blocks_sliding: int = 0  # ... sliding-window groups
    kv_blocks_full_peak: int = 0
    kv_blocks_sliding_peak: int = 0
    kv_snapshot_blocks: int = 0  # free sliding-window pages kept by snapshots (reusable)
    kv_snapshots_total: int = 0  # window states retained so far
    # Per tier below the device (tiers.stack.OFFLOAD_TIERS): hit tokens, blocks and bytes moved
    # in and out, blocks resident, unreadable blocks, failed store calls (`tier_stats`).
    tiers: dict[str, dict[str, int]] = field(default_factory=dict)


def make_runner(config: EngineConfig):
    if config.runner == "simulated":
        return SimRunner(config)
    from harness.engine.runners.torch_runner import TorchRunner

    return TorchRunner(config)


class LLMEngine:
    def __init__(self, config: EngineConfig, runner=None) -> None:
        self.config = config
        self.runner = runner if runner is not None else make_runner(config)
        self.tiers: KVTiers | None = make_tiers(config, self.runner)
        model = config.model
        self.pool = BlockPool(
            config.total_blocks,
            config.block_size,
            enable_caching=config.enable_prefix_caching,
            tiers=self.tiers,
            kinds=tuple(g.kind for g in model.kv_groups),
            sliding_window=model.sliding_window,
            retention=config.prefix_cache_retention,
            reclaim=config.sliding_window_reclaim,
            free_order=config.free_order,
            null_block=config.null_block,
            keep_duplicates=config.keep_duplicates,
        )
        self.scheduler = Scheduler(config, self.pool)
        self.requests: dict[str, Request] = {}
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_finished = 0
        self.last_schedule: list[ScheduledChunk] = []  # for tests and the step log

    @property
    def vocab_size(self) -> int:
        return self.config.model.vocab_size

    # ---- requests -----------------------------------------------------------------------

    def validate(self, request_id: str, prompt: list[int], params: SamplingParams) -> None:
        _check_params(params, self.vocab_size)
        if not isinstance(request_id, str) or not request_id:
            raise EngineRequestError("request_id must be a non-empty string")
        if request_id in self.requests:
            raise EngineRequestError(f"request id {request_id!r} is already in flight")
        if not isinstance(prompt, list | tuple | np.ndarray) or len(prompt) == 0:
            raise EngineRequestError("the prompt is empty")
        self._check_ids(prompt)
        total = len(prompt) + params.max_tokens
        if total > self.config.model_len:
            raise EngineRequestError(
                f"prompt ({len(prompt)} tokens) + max_tokens ({params.max_tokens}) = {total} "
                f"exceeds max_model_len {self.config.model_len}"
            )
        if pages_for(self.config, total) > self.pool.num_blocks:
            raise EngineRequestError(
                f"{total} tokens do not fit in the KV cache ({self.pool.num_blocks} blocks)"
            )

    def _check_ids(self, prompt: list[int]) -> None:
        # numpy checks a 142k-token prompt in a millisecond; the slow scan only names the culprit.
        if isinstance(prompt, np.ndarray):
            arr = prompt
        else:
            arr = np.asarray(prompt) if type(prompt[0]) is int else None
        if (
            arr is not None
            and arr.ndim == 1
            and arr.dtype.kind in "iu"
            and arr.min() >= 0
            and arr.max() < self.vocab_size
        ):
            return
        for i, t in enumerate(prompt):
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self.vocab_size:
                raise EngineRequestError(
                    f"prompt token {i}: {t!r} is not an id in [0, {self.vocab_size})"
                )

    def add_request(
        self, request_id: str, prompt: list[int], params: SamplingParams, *, validated: bool = False
    ) -> Request:
        """Queue a request; `validated` skips re-checking what `validate` already passed."""
        if not validated:
            self.validate(request_id, prompt, params)
        elif request_id in self.requests:
            raise EngineRequestError(f"request id {request_id!r} is already in flight")
        req = Request(request_id, prompt, params, time.perf_counter(), self.config.model.eos_ids)
        self.requests[request_id] = req
        self.scheduler.add(req)
        return req

    def abort_request(self, request_id: str) -> RequestOutput | None:
        req = self.requests.get(request_id)
        if req is None:
            return None
        req.finish_reason = "abort"
        return self._finish(req)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work

    # ---- one step -----------------------------------------------------------------------

    def step(self) -> list[RequestOutput]:
        chunks = self.scheduler.schedule()
        self.last_schedule = chunks
        now = time.perf_counter()
        for c in chunks:
            if c.request.first_scheduled_at is None:
                c.request.first_scheduled_at = now
                self.prompt_tokens_total += c.request.num_prompt_tokens
        if self.tiers is not None and self.runner.simulated:
            self.runner.charge_transfers(self.tiers.drain_moves())
        sampled = self.runner.execute(chunks)
        outputs = [out for c in chunks if (out := self._update(c, sampled)) is not None]
        if self.tiers is not None:
            self.tiers.flush()  # this step's blocks to the shared store, in one request
        if self.config.debug_checks:
            self.scheduler.check_invariants()
        return outputs

    def _update(self, c: ScheduledChunk, sampled: dict[str, int]) -> RequestOutput | None:
        req = c.request
        req.num_computed_tokens += c.num_tokens
        self.pool.cache_blocks(req)
        token = sampled.get(req.request_id)
        if token is None:
            return None
        req.append_token(token)
        self.generation_tokens_total += 1
        if req.finish_reason is not None:
            return self._finish(req)
        return self._output(req)

    def _finish(self, req: Request) -> RequestOutput:
        self.scheduler.remove(req)
        del self.requests[req.request_id]
        self.requests_finished += 1
        return self._output(req, finished=True)

    def _output(
        self, req: Request, finished: bool = False, error: str | None = None
    ) -> RequestOutput:
        new = req.outputs[req.num_emitted :]
        req.num_emitted = req.num_output_tokens
        return RequestOutput(
            request_id=req.request_id,
            new_token_ids=new,
            finished=finished,
            finish_reason=req.finish_reason if finished else None,
            prompt_tokens=req.num_prompt_tokens,
            completion_tokens=req.num_output_tokens,
            cached_tokens=req.cached_tokens,
            cached_tokens_device=req.cached_tokens_device,
            cached_tokens_cpu=req.cached_tokens_cpu,
            first_scheduled_at=req.first_scheduled_at,
            error=error,
            cached_tokens_disk=req.cached_in("disk"),
            cached_tokens_remote=req.cached_in("remote"),
        )

    def fail_all(self, message: str) -> list[RequestOutput]:
        """Finish every request with an error (the runner failed mid-step)."""
        outs = []
        for req in list(self.requests.values()):
            req.finish_reason = "error"
            self.scheduler.remove(req)
            del self.requests[req.request_id]
            self.requests_finished += 1
            outs.append(self._output(req, finished=True, error=message))
        return outs

    def stats(self) -> EngineStats:
        s = self.scheduler
        return EngineStats(
            num_running=len(s.running),
            num_waiting=len(s.waiting),
            kv_cache_usage=self.pool.usage,
            prefix_cache_queries=s.prefix_cache_queries,
            prefix_cache_hits=s.prefix_cache_hits,
            cpu_cache_hits=s.cpu_cache_hits,
            num_preemptions=s.num_preemptions,
            prompt_tokens_total=self.prompt_tokens_total,
            generation_tokens_total=self.generation_tokens_total,
            num_steps=s.num_steps,
            requests_finished=self.requests_finished,
            tiers=tier_stats(self.tiers, s.tier_hits),
            **self._kv_stats(),
        )

    def _kv_stats(self) -> dict[str, int]:
        p = self.pool
        return dict(
            kv_blocks_full=p.in_use[FULL],
            kv_blocks_sliding=p.in_use[SLIDING],
            kv_blocks_full_peak=p.peak_in_use[FULL],
            kv_blocks_sliding_peak=p.peak_in_use[SLIDING],
            kv_snapshot_blocks=p.cached_pages(SLIDING) if p.hybrid else 0,
            kv_snapshots_total=p.num_snapshots,
        )


def pages_for(config: EngineConfig, num_tokens: int) -> int:
    """Pages one request of `num_tokens` can hold at once: every block in full-attention
    groups; in sliding ones, at most `config.sliding_pages` (`BlockPool.reclaim` keeps no more).
    The null block, where there is one, is not counted."""
    blocks = math.ceil(num_tokens / config.block_size)
    kinds = [g.kind for g in config.model.kv_groups]
    sliding = min(blocks, config.sliding_pages) if config.sliding_window_reclaim else blocks
    return sum(blocks if kind == FULL else sliding for kind in kinds)


def _check_params(p: SamplingParams, vocab: int) -> None:
    def bad(field: str, why: str) -> EngineRequestError:
        return EngineRequestError(f"{field}: {why}")

    if isinstance(p.max_tokens, bool) or not isinstance(p.max_tokens, int) or p.max_tokens < 1:
        raise bad("max_tokens", f"must be an integer >= 1, got {p.max_tokens!r}")
    if (
        isinstance(p.min_tokens, bool)
        or not isinstance(p.min_tokens, int)
        or not 0 <= p.min_tokens <= p.max_tokens
    ):
        raise bad("min_tokens", f"must be an integer in [0, max_tokens], got {p.min_tokens!r}")
    if (
        not isinstance(p.temperature, int | float)
        or not math.isfinite(p.temperature)
        or p.temperature < 0
    ):
        raise bad("temperature", f"must be a finite number >= 0, got {p.temperature!r}")
    for t in p.stop_token_ids:
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab:
            raise bad("stop_token_ids", f"{t!r} is not an id in [0, {vocab})")
