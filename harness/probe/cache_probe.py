"""`harness probe cache`: what a server's prefix cache really keeps, measured from outside.

Three measurements, one request at a time, each prompt unique to this probe (seeded token ids):

- **Block size and whole-block rule.** A base prompt is sent, then prompts that share its first
  `s` tokens for several `s`: a cache of `B`-token blocks serves `floor(s / B) * B`, so `B` is the
  greatest common divisor of the hits. A prompt of exactly `k` blocks is then extended (is its last
  block kept?) and sent again whole (is a whole prompt served, or its last block recomputed?).
- **Retained capacity.** Unique contexts of `C` tokens are sent until they fill `fill_factor`
  times the advertised pool, then re-sent newest first: an LRU cache keeps the newest, so the
  first context not hit whole marks what is kept, `retained_tokens` the tokens hit up to there.
  Hits are read from `cached_tokens`, or, where the server does not report it, from TTFT below the
  geometric mean of a cold and a warm calibration probe. Without an advertised pool, fill goes on
  until an early context (a canary) misses.
- **Idle retention.** One context per wait is sent, then re-sent after that wait with no other
  traffic: `idle_retention_s` is the longest wait after which it still hit (a lower bound when
  every wait hit).
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from harness.errors import InputError
from harness.probe.client import Advertised, ProbeClient, Reply

TOKEN_RANGE = (1000, 31000)  # ordinary ids in every vocabulary the harness serves (32k and up)
# the greatest common divisor of their floors to whole blocks is the block, for 1 to 256 tokens
SHARED_LENGTHS = (7, 23, 40, 57, 75, 100, 150, 333, 517, 790, 1001, 1500, 1800, 2100)
TAIL_TOKENS = 40  # the fresh tokens after a shared prefix
WHOLE_BLOCKS = 8
MIN_BLOCKS = 2  # whole blocks in each capacity context, at least
CALIBRATION_SAMPLES = 3
MIN_SEPARATION = 3.0  # cold / warm TTFT below this: TTFT cannot tell a hit from a miss


@dataclass(frozen=True)
class ProbeSettings:
    context_tokens: int | None = None  # each context's length; default: pool / 16
    pool_tokens: int | None = None  # the advertised pool; default: the server's /metrics
    fill_factor: float = 1.5
    idle_waits_s: tuple[float, ...] = (2.0, 8.0, 30.0)
    detect: str = "auto"  # auto | cached_tokens | ttft
    max_fill_tokens: int = 1_000_000  # the fill's bound when no pool is advertised
    seed: int | None = None  # None: a fresh one (a warm server never hits a previous probe)


@dataclass
class ProbeResult:
    endpoint: str
    model: str
    seed: int
    advertised: Advertised | None = None
    detection: str | None = None
    calibration: dict = field(default_factory=dict)
    block: dict = field(default_factory=dict)
    capacity: dict = field(default_factory=dict)
    idle: dict = field(default_factory=dict)
    stages_done: list[str] = field(default_factory=list)


class CacheProbe:
    def __init__(self, client: ProbeClient, settings: ProbeSettings, result: ProbeResult) -> None:
        self.client, self.s, self.result = client, settings, result
        self._rng = np.random.default_rng(result.seed)

    def fresh(self, n: int) -> list[int]:
        return self._rng.integers(*TOKEN_RANGE, size=n).tolist()

    async def run(self) -> ProbeResult:
        adv = await self.client.advertised()
        self.result.advertised = adv
        await self.calibrate()
        self.result.stages_done.append("calibration")
        if self.result.detection == "cached_tokens":
            await self.block_size()
            self.result.stages_done.append("block")
        await self.capacity()
        self.result.stages_done.append("capacity")
        await self.idle_retention()
        self.result.stages_done.append("idle")
        return self.result

    # ---- calibration -------------------------------------------------------------------------

    async def calibrate(self) -> None:
        """Three fresh contexts sent cold, then warm: the TTFT threshold between the medians
        (a first request's setup costs the first cold one; medians leave it out)."""
        prompts = [self.fresh(self.context_tokens()) for _ in range(CALIBRATION_SAMPLES)]
        cold = [await self.client.send(p) for p in prompts]
        warm = [await self.client.send(p) for p in prompts]
        reported = all(r.cached_tokens is not None for r in warm)
        if self.s.detect == "cached_tokens" and not reported:
            raise_no_counts(self.client.base)
        self.result.detection = (
            "ttft" if self.s.detect == "ttft" or not reported else "cached_tokens"
        )
        cold_s = statistics.median(r.ttft_s for r in cold)
        warm_s = max(statistics.median(r.ttft_s for r in warm), 1e-6)
        self.result.calibration = {
            "context_tokens": len(prompts[0]),
            "cold": [_reply(r) for r in cold],
            "warm": [_reply(r) for r in warm],
            "cold_ttft_s": cold_s,
            "warm_ttft_s": warm_s,
            "ttft_threshold_s": math.sqrt(cold_s * warm_s),
            "separation": cold_s / warm_s,
            "ttft_reliable": cold_s / warm_s >= MIN_SEPARATION,
        }

    def kept_whole(self, reply: Reply, n: int) -> bool:
        if self.result.detection == "cached_tokens":
            block = self.result.block.get("block_size") or 16
            return (reply.cached_tokens or 0) >= n - 2 * block
        return reply.ttft_s < self.result.calibration["ttft_threshold_s"]

    def kept_context(self, reply: Reply, n: int, cacheable: int | None) -> bool:
        """A capacity context kept: every one of its whole blocks hit, where counts say so."""
        if cacheable is not None and self.result.detection == "cached_tokens":
            return (reply.cached_tokens or 0) >= cacheable
        return self.kept_whole(reply, n)

    def hit_tokens(self, reply: Reply, n: int) -> int:
        if self.result.detection == "cached_tokens":
            return reply.cached_tokens or 0
        return n if self.kept_whole(reply, n) else 0

    # ---- block size and whole-block rule -----------------------------------------------------

    async def block_size(self) -> None:
        pool = self.pool()  # without one: prompts as long as the calibration's fit
        limit = min(
            self._max_prompt(), pool // 2 if pool else self.result.calibration["context_tokens"]
        )
        lengths = [s for s in SHARED_LENGTHS if s + TAIL_TOKENS <= limit]
        base = self.fresh(max(lengths) + TAIL_TOKENS)
        await self.client.send(base)
        cached: list[int | None] = []
        for s in lengths:
            cached.append(
                (await self.client.send(base[:s] + self.fresh(TAIL_TOKENS))).cached_tokens
            )
        positive = [c for c in cached if c]
        block = math.gcd(*positive) if positive else None
        pairs = [(s, c) for s, c in zip(lengths, cached, strict=True) if c is not None]
        whole = block is not None and all(c % block == 0 for _, c in pairs)
        full = block is not None and all(c == s // block * block for s, c in pairs)
        hits = [
            {"shared_tokens": s, "cached_tokens": c} for s, c in zip(lengths, cached, strict=True)
        ]
        self.result.block = {
            "block_size": block,
            "hits_whole_blocks": whole,  # every hit a multiple of the block
            # every hit all the shared prefix's whole blocks (a sliding-window model's is less)
            "hits_every_shared_block": full,
            "shared_prefix_probes": hits,
            "min_hit_tokens": min(positive) if positive else None,
        }
        if block is not None and WHOLE_BLOCKS * block + TAIL_TOKENS <= limit:
            self.result.block.update(await self._whole_block_rule(block))

    async def _whole_block_rule(self, block: int) -> dict:
        whole = self.fresh(WHOLE_BLOCKS * block)
        await self.client.send(whole)
        extended = await self.client.send(whole + self.fresh(TAIL_TOKENS))
        again = await self.client.send(whole)
        return {
            "whole_block_prompt_tokens": len(whole),
            "last_block_kept": extended.cached_tokens == len(whole),
            "whole_prompt_served": again.cached_tokens == len(whole),
            "whole_block_hits": {
                "extended": extended.cached_tokens,
                "resent": again.cached_tokens,
            },
        }

    # ---- retained capacity -------------------------------------------------------------------

    def pool(self) -> int | None:
        adv = self.result.advertised
        return self.s.pool_tokens or (adv.pool_tokens if adv else None)

    def _max_prompt(self) -> int:
        adv = self.result.advertised
        return (adv.max_model_len if adv and adv.max_model_len else 8192) - 2

    def context_tokens(self) -> int:
        if self.s.context_tokens:
            return min(self.s.context_tokens, self._max_prompt())
        pool = self.pool()
        wanted = pool // 16 if pool else 2048
        return max(64, min(wanted, self._max_prompt()))

    def block(self) -> int | None:
        """The cache's block: measured (block stage), else what /metrics advertises."""
        adv = self.result.advertised
        return self.result.block.get("block_size") or (adv.block_size if adv else None)

    def capacity_context(self) -> tuple[int, int, str | None]:
        """A context's length, the tokens of it a cache keeps, and why it could not be sized in
        whole blocks (None when it was). Whole blocks and half a block: the prompt-1 cap and a
        whole-block prompt's last-block rule never apply, so a kept context hits exactly its
        whole blocks, at least `MIN_BLOCKS` of them (a context of pool/16 tokens with large
        blocks, 254 of 128-token blocks, would keep one block and fill half the pool)."""
        n, block = self.context_tokens(), self.block()
        if not block:
            return n, n, "no block size measured or advertised: contexts not in whole blocks"
        room = (self._max_prompt() - block // 2) // block
        blocks = min(max(MIN_BLOCKS, round(n / block)), room)
        if blocks < MIN_BLOCKS:
            why = f"{MIN_BLOCKS} blocks of {block} do not fit the model's context"
            return n, n // block * block, why
        return blocks * block + block // 2, blocks * block, None

    async def capacity(self) -> None:
        n, cached, why = self.capacity_context()
        pool = self.pool()
        sent: list[list[int]] = []
        if pool:
            for _ in range(math.ceil(self.s.fill_factor * pool / max(1, cached))):
                sent.append(self.fresh(n))
                await self.client.send(sent[-1])
        else:
            await self._fill_until_canary_misses(sent, n)
        scan, retained = [], 0
        for i in range(len(sent) - 1, -1, -1):
            reply = await self.client.send(sent[i])
            kept = self.kept_context(reply, n, None if why else cached)
            retained += self.hit_tokens(reply, n)
            scan.append({"context": i, **_reply(reply), "kept": kept})
            if not kept:
                break
        filled = cached * len(sent)
        self.result.capacity = {
            "context_tokens": n,
            "cacheable_tokens": cached,  # of each context: its whole blocks
            "contexts_sent": len(sent),
            "filled_tokens": filled,  # cacheable tokens sent: what the fill put in the pool
            "fill_of_pool": filled / pool if pool else None,
            "not_block_sized": why,
            "retained_tokens": retained,
            "lower_bound": all(r["kept"] for r in scan),  # every context was still kept
            "scan_newest_first": scan,
        }

    async def _fill_until_canary_misses(self, sent: list[list[int]], n: int) -> None:
        """No advertised pool: fill in rounds; after each, re-send the oldest context not yet
        checked. Once one misses, the tokens filled bound the pool; as many again are filled, so
        the contexts the canaries refreshed are older than a pool's worth, then the scan."""
        canary = 0
        while n * len(sent) < self.s.max_fill_tokens:
            for _ in range(8):
                sent.append(self.fresh(n))
                await self.client.send(sent[-1])
            if not self.kept_whole(await self.client.send(sent[canary]), n):
                break
            canary += 1
        for _ in range(len(sent)):
            sent.append(self.fresh(n))
            await self.client.send(sent[-1])

    # ---- idle retention ----------------------------------------------------------------------

    async def idle_retention(self) -> None:
        waits = sorted(self.s.idle_waits_s)
        n = min(self.context_tokens(), 1024)
        prompts = [self.fresh(n) for _ in waits]
        start = time.perf_counter()
        sent_at = []
        for p in prompts:
            await self.client.send(p)
            sent_at.append(time.perf_counter() - start)
        rows = []
        for p, at, wait in zip(prompts, sent_at, waits, strict=True):
            await asyncio.sleep(max(0.0, at + wait - (time.perf_counter() - start)))
            idle = time.perf_counter() - start - at
            reply = await self.client.send(p)
            rows.append(
                {"wait_s": wait, "idle_s": idle, **_reply(reply), "kept": self.kept_whole(reply, n)}
            )
        first_lost = next((r["wait_s"] for r in rows if not r["kept"]), None)
        kept = [r["wait_s"] for r in rows if first_lost is None or r["wait_s"] < first_lost]
        self.result.idle = {
            "context_tokens": n,
            "idle_retention_s": max(kept) if kept else 0.0,
            "lower_bound": first_lost is None,
            "first_lost_after_s": first_lost,
            "waits": rows,
        }


def _reply(reply: Reply) -> dict:
    return {
        "ttft_s": reply.ttft_s,
        "cached_tokens": reply.cached_tokens,
        "prompt_tokens": reply.prompt_tokens,
    }


def raise_no_counts(endpoint: str) -> None:
    raise InputError(f"{endpoint} reports no cached_tokens; use --detect ttft", field="--detect")
