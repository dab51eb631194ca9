"""Continuous batching in one token-budget loop (vLLM v1's scheduler, reduced to its bookkeeping).

Each step: running requests first (decodes and continuing chunked prefills, in admission order),
then waiting ones, strictly FCFS: the head of the queue blocks those behind it. A prefill chunk is
capped by the step's remaining budget and by `long_prefill_token_threshold` when set. When blocks
run out, the latest-arrived running request is preempted by recompute: its blocks are freed (they
keep their hashes, so re-admission usually hits them) and it returns to the head of the queue.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from harness.engine.block_pool import BlockPool, PrefixHit
from harness.engine.config import EngineConfig
from harness.engine.sequence import Request, RequestStatus
from harness.engine.tiers.stack import OFFLOAD_TIERS
from harness.errors import EngineError


@dataclass(slots=True)
class ScheduledChunk:
    request: Request
    start: int  # tokens already computed (the chunk's first position)
    num_tokens: int
    # The chunk reaches the end of the request's tokens, so it yields the next token. Fixed at
    # scheduling time: the request grows by that token afterwards.
    samples: bool = field(init=False)

    def __post_init__(self) -> None:
        self.samples = self.start + self.num_tokens == self.request.num_tokens


class Scheduler:
    def __init__(self, config: EngineConfig, pool: BlockPool) -> None:
        self.config = config
        self.pool = pool
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.num_steps = 0
        self.num_preemptions = 0
        self.prefix_cache_queries = 0  # prompt tokens looked up at first admission
        self.prefix_cache_hits = 0  # of which served from the device cache or a tier below it
        self.tier_hits: Counter[str] = Counter()  # hit tokens by tier (tiers.stack.TIERS)

    @property
    def cpu_cache_hits(self) -> int:
        return self.tier_hits["cpu"]

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, req: Request) -> None:
        self.waiting.append(req)

    def remove(self, req: Request) -> None:
        """Take a request out (finished or aborted) and free its blocks."""
        if req.status is RequestStatus.RUNNING:
            self.running.remove(req)
            self.pool.free(req)
        elif req.status is RequestStatus.WAITING:
            self.waiting.remove(req)
        req.status = RequestStatus.FINISHED

    # ---- one step -----------------------------------------------------------------------

    def schedule(self) -> list[ScheduledChunk]:
        self.num_steps += 1
        budget = self.config.max_num_batched_tokens
        chunks: list[ScheduledChunk] = []
        prefill_ok = self._prefill_turn()
        budget, preempted = self._schedule_running(chunks, budget, prefill_ok)
        if not preempted and prefill_ok:
            self._schedule_waiting(chunks, budget)
        return chunks

    def _prefill_turn(self) -> bool:
        # The interval throttles prefill only while there are decodes to protect; an engine with
        # nothing to decode would otherwise idle through the skipped steps.
        interval = self.config.prefill_schedule_interval
        if interval == 1 or self.num_steps % interval == 0:
            return True
        return not any(not r.is_prefill for r in self.running)

    def _chunk_size(self, remaining: int, budget: int) -> int:
        cap = self.config.long_prefill_token_threshold
        return min(remaining, budget, cap) if cap > 0 else min(remaining, budget)

    def _schedule_running(
        self, chunks: list[ScheduledChunk], budget: int, prefill_ok: bool
    ) -> tuple[int, bool]:
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if req.is_prefill and not prefill_ok:
                i += 1
                continue
            n = self._chunk_size(req.num_tokens - req.num_computed_tokens, budget)
            while not self.pool.allocate_slots(req, n):
                preempted = True
                victim = max(self.running, key=lambda r: r.arrival)
                budget += self._preempt(victim, chunks)
                if victim is req:
                    break
            if req.status is RequestStatus.RUNNING:
                chunks.append(ScheduledChunk(req, req.num_computed_tokens, n))
                self._cache_scheduled(req, req.num_computed_tokens + n)
                budget -= n
            i = self.running.index(req) + 1 if req in self.running else i
        return budget, preempted

    def _preempt(self, victim: Request, chunks: list[ScheduledChunk]) -> int:
        """Recompute preemption; returns the budget the victim's dropped chunk gave back."""
        refund = 0
        for c in chunks:
            if c.request is victim:
                refund = c.num_tokens
                chunks.remove(c)
                break
        self.running.remove(victim)
        self.pool.free(victim)
        victim.num_computed_tokens = 0
        victim.status = RequestStatus.WAITING
        victim.num_preemptions += 1
        self.waiting.appendleft(victim)
        self.num_preemptions += 1
        return refund

    def _schedule_waiting(self, chunks: list[ScheduledChunk], budget: int) -> None:
        bs = self.pool.block_size
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            req = self.waiting[0]
            if self._still_blocked(req, budget):
                break
            hit = self.pool.find_prefix(req)
            num_hit = len(hit.entries) * bs
            n = self._chunk_size(req.num_tokens - num_hit, budget)
            if not self._fits(req, hit, num_hit + n):
                req.blocked = (self.pool.num_frees, self.pool.frontier(req, hit), num_hit, n)
                break
            req.blocked = None
            self.pool.take(req, hit)
            req.num_computed_tokens = num_hit
            if not self.pool.allocate_slots(req, n):
                # Admitted by its whole prompt's bound (`admit_whole_prompt`), a chunk shorter
                # than the rest of the prompt can still need more pages than are free: every
                # sliding group's next blocks past a long hit. It waits, as a request vLLM's
                # allocate_slots finds no room for does; its hit's pages go back to the free
                # queue's tail.
                self.pool.free(req)
                req.num_computed_tokens = 0
                break
            if not req.admitted:
                self._first_admission(req, num_hit, hit)
            self.waiting.popleft()
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            chunks.append(ScheduledChunk(req, num_hit, n))
            self._cache_scheduled(req, num_hit + n)
            budget -= n

    def _cache_scheduled(self, req: Request, upto: int) -> None:
        """vLLM hashes a chunk's full blocks when it schedules them (`cache_at_schedule`)."""
        if self.config.cache_at_schedule:
            self.pool.cache_blocks(req, min(upto, req.num_tokens))

    def _fits(self, req: Request, hit: PrefixHit, num_tokens: int) -> bool:
        """Room to admit `req` with `hit` and its first `num_tokens` (or, admitting by the
        whole prompt, all of it)."""
        if self.config.admit_whole_prompt:
            return self.pool.can_take_whole(hit, req.num_tokens, self.config.sliding_pages)
        return self.pool.can_take(hit, -(-num_tokens // self.pool.block_size) - len(hit.entries))

    def _still_blocked(self, req: Request, budget: int) -> bool:
        """True when the head that did not fit last time provably still cannot fit, so its
        prefix walk (~9k blocks for a 142k-token prompt) is skipped. Without a free() since, free
        space only shrinks; if its hit cannot have grown and its chunk is no smaller, neither can
        its need."""
        if req.blocked is None:
            return False
        frees, frontier, num_hit, n = req.blocked
        if frees != self.pool.num_frees or self.pool.could_grow(frontier):
            return False
        if self._chunk_size(req.num_tokens - num_hit, budget) < n:
            return False
        if self.config.debug_checks:
            self._check_blocked(req, budget)
        return True

    def _check_blocked(self, req: Request, budget: int) -> None:
        bs = self.pool.block_size
        hit = self.pool.find_prefix(req)
        n = self._chunk_size(req.num_tokens - len(hit.entries) * bs, budget)
        if self._fits(req, hit, len(hit.entries) * bs + n):
            raise EngineError(f"request {req.request_id} was skipped as blocked but fits")

    def _first_admission(self, req: Request, num_hit: int, hit: PrefixHit) -> None:
        # vLLM semantics: cached_tokens is what the first admission found, never updated after.
        bs = self.pool.block_size
        tiers = {tier: hit.tier_blocks[tier] * bs for tier in OFFLOAD_TIERS}
        req.cached_tiers = {"device": num_hit - sum(tiers.values()), **tiers}
        self.prefix_cache_queries += req.num_prompt_tokens
        self.prefix_cache_hits += num_hit
        self.tier_hits.update(req.cached_tiers)

    def check_invariants(self) -> None:
        self.pool.check_invariants([t for r in self.running for t in r.block_tables])
