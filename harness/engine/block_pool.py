"""The device KV pool: pages of one size for every attention kind, reference counts, an LRU.

Semantics follow vLLM's KVCacheManager / FreeKVCacheBlockQueue and its hybrid allocator:
- A page holds one KV group's layers for `block_size` tokens; full-attention and sliding-window
  groups draw pages from this one pool, nothing is reserved per kind (config.KVGroup).
- Freed pages keep their hash ("lazy eviction") and can still be hit until reallocated. The free
  queue is an O(1) LRU (an OrderedDict): allocation pops from the head. A request's blocks are
  freed tail first, so its private tail is evicted before the prefix others may share; pages with
  no hash (partial, or given back) go to the head since they hold nothing reusable.
- Sliding-window pages whose blocks fell out of a running request's window are given back at once
  (the next allocation). They keep their content only where a snapshot retains it: the retention
  policy picks the points whose window state outlives the request (see `retain_window`).
- A hashed page evicted from the device goes to the tiers below it (CPU, then disk) when
  configured, and every full block to the shared store when there is one (`tiers/stack.py`).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import cast

from harness.engine.config import FULL, SLIDING
from harness.engine.page_map import Block, PageMap
from harness.engine.pool_invariants import check_pool
from harness.engine.prefix_lookup import (
    ROOT_HASH,
    PrefixHit,
    block_hash,
    find_prefix,
    hash_blocks,
    tier_key,
    window_start,
)
from harness.engine.sequence import NULL_BLOCK, Frontier, Request
from harness.engine.tiers.cpu import CpuTier
from harness.engine.tiers.stack import KVTiers

__all__ = ["ROOT_HASH", "BlockPool", "PrefixHit", "block_hash", "hash_blocks"]
SELECTIVE = ("interval+selective", "replay+junction")  # retention that keeps junctions
VLLM_RETENTION = ("all", "replay+junction")  # a hashed sliding page keeps its hash when freed


class BlockPool:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        enable_caching: bool = True,
        tiers: KVTiers | None = None,
        kinds: tuple[str, ...] = (FULL,),
        sliding_window: int = 0,
        retention: str = "interval+selective",
        reclaim: bool = True,
        free_order: str = "block",
        null_block: bool = False,
        keep_duplicates: bool = False,
    ) -> None:
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.kinds = kinds  # of each KV group
        self.sliding_window = sliding_window if SLIDING in kinds else 0
        self.retention = retention
        self.reclaim_window = reclaim  # False: sliding pages live as long as full ones (a baseline)
        # How a finished request's pages join the LRU: "block", tail blocks of every group first;
        # "group", vLLM's: group by group (sliding ones first, as vLLM orders Gemma 3's groups).
        self.free_order = free_order
        self.blocks = [Block(i) for i in range(num_blocks)]
        # vLLM's BlockPool takes page 0 out of its free queue for good (the null block that pads
        # block tables), so a pool of N pages holds N - 1; `null_block` models that.
        first = 1 if null_block else 0
        self.free_queue: OrderedDict[int, None] = OrderedDict(
            (i, None) for i in range(first, num_blocks)
        )
        self.null_page = first == 1
        self.pages = PageMap(keep_duplicates)  # content -> page (vLLM's BlockHashToBlockMap)
        self.tiers = tiers
        self.retained: set[bytes] = set()  # block hashes whose sliding pages outlive their holders
        self.in_use = Counter({FULL: 0, SLIDING: 0})  # pages held by requests, by kind
        self.peak_in_use = Counter({FULL: 0, SLIDING: 0})
        self.num_snapshots = 0  # window states retained so far
        self.num_evictions = 0
        self.num_frees = 0  # free()s and window reclaims: what can give a blocked request room

    @property
    def cpu_tier(self) -> CpuTier | None:
        return self.tiers.cpu if self.tiers is not None else None

    @property
    def num_blocks(self) -> int:
        """Usable pages (the null block, when there is one, holds nothing)."""
        return len(self.blocks) - self.null_page

    @property
    def num_free(self) -> int:
        return len(self.free_queue)

    @property
    def usage(self) -> float:
        return 1.0 - self.num_free / self.num_blocks

    @property
    def hybrid(self) -> bool:
        return self.sliding_window > 0

    def cached_pages(self, kind: str) -> int:
        """Free pages still holding reusable KV of `kind` (for sliding ones: snapshots)."""
        return sum(
            1
            for b in self.blocks
            if b.ref_cnt == 0 and b.hash is not None and self.kinds[b.group] == kind
        )

    # ---- prefix lookup ------------------------------------------------------------------

    def find_prefix(self, req: Request) -> PrefixHit:
        return find_prefix(self, req)

    def frontier(self, req: Request, hit: PrefixHit) -> Frontier | None:
        """The next block after the hit, as (map key, hash); None if the hit cannot grow."""
        i, bs = hit.num_blocks, self.block_size
        if not self.enable_caching or i >= (req.num_tokens - 1) // bs:
            return None
        parent = hit.hashes[-1] if hit.hashes else ROOT_HASH
        tokens = req.block_tokens(i, bs)
        return (0, parent, tokens), block_hash(parent, tokens)

    def could_grow(self, frontier: Frontier | None) -> bool:
        """Whether a hit that stopped at `frontier` could now be longer. A hybrid hit can also
        grow by window blocks appearing further back, so it is always looked up again."""
        if frontier is None:
            return False
        key, h = frontier
        return (
            self.hybrid
            or key in self.pages.first
            or (self.tiers is not None and self.tiers.contains(h))
        )

    def can_take(self, hit: PrefixHit, num_new_blocks: int) -> bool:
        """Room for the hit and `num_new_blocks` more blocks (in every group)."""
        # Touching a free hit page removes it from the free queue, so it no longer counts.
        need = hit.num_restored_blocks + num_new_blocks * len(self.kinds)
        return need <= self.num_free - hit.num_free_device

    def can_take_whole(self, hit: PrefixHit, num_tokens: int, sliding_pages: int) -> bool:
        """Room for the hit and every block of `num_tokens` past it, a sliding group's at most
        `sliding_pages` (vLLM's admission with `scheduler_reserve_full_isl`)."""
        blocks, k = -(-num_tokens // self.block_size), len(hit.entries)
        full, sliding = blocks - k, max(min(blocks, sliding_pages) - k, 0)
        per_group = [
            sliding if kind == SLIDING and self.reclaim_window else full for kind in self.kinds
        ]
        need = hit.num_restored_blocks + sum(per_group)
        return need <= self.num_free - hit.num_free_device

    def take(self, req: Request, hit: PrefixHit) -> None:
        """Give the request the hit's pages: share device ones, copy tier ones back."""
        if self.tiers is None and len(self.kinds) == 1 and not self.hybrid:
            pages = cast(list[int], hit.tables[0])  # the common case: one group, device pages
            self._touch(pages, 0)
            req.block_tables = [list(pages)]
        else:
            # Touch every device hit first so allocating for the tier ones cannot evict them.
            for g, table in enumerate(hit.tables):
                self._touch([e for e in table if isinstance(e, int) and e != NULL_BLOCK], g)
            req.block_tables = [
                [self._restore(e, g) if isinstance(e, tuple) else e for e in table]
                for g, table in enumerate(hit.tables)
            ]
        if len(req.block_hashes) < len(hit.hashes):  # the hit's hashes come free: no rehashing
            req.block_hashes[:] = hit.hashes
        req.num_cached_blocks = hit.num_blocks
        req.num_reclaimed_blocks = (
            window_start(hit.num_blocks * self.block_size, self.sliding_window, self.block_size)
            if self.reclaim_window
            else 0
        )
        self._plan_snapshots(req, hit)

    def _restore(self, entry: tuple, g: int) -> int:
        key, parent, tokens, payload, tier = entry
        (page,) = self._allocate(1, g)
        if self.tiers is not None:
            self.tiers.restore(tier, key, page, payload)
        self.pages.register(self.blocks[page], block_hash(parent, tokens), parent, tokens)
        return page

    # ---- allocation ---------------------------------------------------------------------

    def blocks_needed(self, req: Request, num_new_tokens: int) -> int:
        """New blocks per group (pages: this times the number of groups)."""
        total = -(-(req.num_computed_tokens + num_new_tokens) // self.block_size)
        return max(0, total - len(req.block_table))

    def allocate_slots(self, req: Request, num_new_tokens: int) -> bool:
        """Grow every group's table to hold `num_new_tokens` more; False if no room."""
        self.reclaim(req)
        need = self.blocks_needed(req, num_new_tokens)
        if need * len(self.kinds) > self.num_free:
            return False
        for g, table in enumerate(req.block_tables):
            table.extend(self._allocate(need, g))
        return True

    def reclaim(self, req: Request) -> None:
        """Give back the sliding-window pages no later token reads (vLLM: remove_skipped_blocks)."""
        if not (self.hybrid and self.reclaim_window):
            return
        end = window_start(req.num_computed_tokens, self.sliding_window, self.block_size)
        first, sliding = req.num_reclaimed_blocks, self._sliding_groups()
        if self.free_order == "group":  # vLLM: group by group, each its last block first
            blocks = [(g, i) for g in sliding for i in reversed(range(first, end))]
        else:
            blocks = [(g, i) for i in range(first, end) for g in sliding]
        for g, i in blocks:
            table = req.block_tables[g]
            if table[i] != NULL_BLOCK:
                self._release(table[i])
                table[i] = NULL_BLOCK
        if blocks:  # pages given back: a blocked request may fit now
            self.num_frees += 1
        req.num_reclaimed_blocks = max(req.num_reclaimed_blocks, end)

    def _group_order(self) -> list[int]:
        """vLLM's order of Gemma 3's KV groups (its single_type_managers): sliding ones first."""
        return sorted(range(len(self.kinds)), key=lambda g: self.kinds[g] != SLIDING)

    def _sliding_groups(self) -> list[int]:
        return [g for g, kind in enumerate(self.kinds) if kind == SLIDING]

    def free(self, req: Request) -> None:
        """Release a finished or preempted request's pages, tail first."""
        self.num_frees += 1
        if self.hybrid and self.retention not in ("none", "replay+junction"):
            self.retain_window(req, req.num_computed_tokens // self.block_size)  # a turn end
        if len(req.block_tables) == 1 and not self.hybrid:  # one group: either order is one
            self._release_full(reversed(req.block_table))  # one group, no NULL_BLOCK in it
        else:
            if self.free_order == "group":  # vLLM: each group in turn, its own tail first
                pages = [
                    t[i]
                    for g in self._group_order()
                    for t in (req.block_tables[g],)
                    for i in reversed(range(len(t)))
                ]
            else:
                pages = [
                    t[i] for i in reversed(range(len(req.block_table))) for t in req.block_tables
                ]
            for page in pages:
                if page != NULL_BLOCK:
                    self._release(page)
        req.block_tables = [[] for _ in self.kinds]
        req.num_cached_blocks = req.num_reclaimed_blocks = 0
        req.snapshot_points = []
        req.window_mask = set()

    def _release_full(self, pages) -> None:
        """`_release` of full-attention pages, their count kept once for the batch."""
        blocks, free_queue, freed = self.blocks, self.free_queue, 0
        for page in pages:
            block = blocks[page]
            block.ref_cnt -= 1
            if block.ref_cnt:
                continue
            freed += 1
            free_queue[page] = None
            if block.hash is None:
                free_queue.move_to_end(page, last=False)
        self.in_use[FULL] -= freed

    def _release(self, page: int) -> None:
        block = self.blocks[page]
        block.ref_cnt -= 1
        if block.ref_cnt:
            return
        self.in_use[self.kinds[block.group]] -= 1
        self.free_queue[page] = None
        sliding = self.kinds[block.group] == SLIDING and self.reclaim_window
        # all: earlier vLLM's lazy eviction; replay+junction: hashed only where a mask kept it
        dropped = self.retention not in VLLM_RETENTION and block.hash not in self.retained
        if block.hash is not None and sliding and dropped:
            self.pages.unregister(block)  # a window block no snapshot keeps: its KV is dropped
        if block.hash is None:
            self.free_queue.move_to_end(page, last=False)

    # ---- registration and snapshots -----------------------------------------------------

    def cache_blocks(self, req: Request, upto: int | None = None) -> None:
        """Hash and register the request's blocks that are now full and computed (or, `upto`,
        that will be once the step that computes its first `upto` tokens has run)."""
        if not self.enable_caching:
            return
        bs = self.block_size
        n_full = (req.num_computed_tokens if upto is None else upto) // bs
        if n_full <= req.num_cached_blocks and not req.snapshot_points:
            return  # no block filled since (a decode step's usual case)
        hashes = hash_blocks(req, bs, n_full)
        masked = self._masked_groups()
        for i in range(req.num_cached_blocks, n_full):
            parent, tokens = hashes[i - 1] if i else ROOT_HASH, req.block_tokens(i, bs)
            for g, table in enumerate(req.block_tables):
                block = self.blocks[table[i]] if table[i] != NULL_BLOCK else None
                if block is None or block.hash is not None:
                    continue
                if g in masked and i not in req.window_mask:
                    continue  # vLLM never hashes it: no request can hit it, even while it runs
                # A block another request registered first stays unhashed (one page per
                # content), or, keeping duplicates as vLLM does, is hashed behind it.
                if (g, parent, tokens) not in self.pages.first:
                    self.pages.register(block, hashes[i], parent, tokens)
                    if self.tiers is not None:
                        self.tiers.write_through(tier_key(hashes[i], g), tokens, block.block_id)
                elif self.pages.keep_duplicates:
                    self.pages.register(block, hashes[i], parent, tokens, duplicate=True)
        req.num_cached_blocks = max(req.num_cached_blocks, n_full)
        while req.snapshot_points and req.snapshot_points[0] <= n_full:
            self.retain_window(req, req.snapshot_points.pop(0))

    def _masked_groups(self) -> frozenset[int]:
        """The groups whose blocks a request hashes by its own window mask (`replay+junction`)."""
        if not (self.hybrid and self.reclaim_window and self.retention == "replay+junction"):
            return frozenset()
        return frozenset(self._sliding_groups())

    def retain_window(self, req: Request, k: int) -> None:
        """Keep the sliding-window state at k blocks (its window's blocks) past its holders."""
        if not self.enable_caching or k <= 0:
            return
        if self.retention == "replay+junction":  # the request's mask hashed them: nothing to add
            self.num_snapshots += 1
            return
        lo = window_start(k * self.block_size, self.sliding_window, self.block_size)
        hashes = hash_blocks(req, self.block_size, k)
        self.retained.update(hashes[lo:k])
        self.num_snapshots += 1

    def _plan_snapshots(self, req: Request, hit: PrefixHit) -> None:
        """Interval: the end of the prompt (a turn end; `replay+junction`, vLLM's: its aligned
        prompt - 1, where a resend's hit stops). Selective (Marconi; vLLM's junction): a prefix
        the full layers hold beyond the window-aware hit has been seen before -- keep its state
        this time."""
        if not self.hybrid or self.retention == "none":
            return
        vllm = self.retention == "replay+junction"
        points = {(req.num_prompt_tokens - vllm) // self.block_size}
        if self.retention in SELECTIVE and hit.num_full_blocks > hit.num_blocks:
            points.add(hit.num_full_blocks)
        req.snapshot_points = sorted(p for p in points if p > hit.num_blocks)
        if vllm:  # vLLM's reachable_block_mask: each point's window, the blocks before it
            bs, w = self.block_size, self.sliding_window
            req.window_mask = {
                i for p in req.snapshot_points for i in range(window_start(p * bs, w, bs), p)
            }

    def _touch(self, pages: list[int], g: int) -> None:
        blocks, free_queue, revived = self.blocks, self.free_queue, 0
        for page in pages:
            block = blocks[page]
            if block.ref_cnt == 0:
                del free_queue[page]
                revived += 1
            block.ref_cnt += 1
        self._count_in_use(g, revived)

    def _allocate(self, n: int, g: int) -> list[int]:
        out = []
        for _ in range(n):
            page, _ = self.free_queue.popitem(last=False)
            block = self.blocks[page]
            if block.hash is not None:
                self._evict(block)
            block.ref_cnt, block.group = 1, g
            out.append(page)
        self._count_in_use(g, n)
        return out

    def _count_in_use(self, g: int, n: int) -> None:
        """n more pages of group g in use, counted once per batch (the peak is the batch's end:
        counts only grow within one)."""
        if n:
            kind = self.kinds[g]
            self.in_use[kind] += n
            self.peak_in_use[kind] = max(self.peak_in_use[kind], self.in_use[kind])

    def _evict(self, block: Block) -> None:
        assert block.hash is not None and block.tokens is not None  # only hashed pages evict
        if self.tiers is not None and self.tiers.local:
            self.tiers.offload(tier_key(block.hash, block.group), block.tokens, block.block_id)
        elif self.kinds[block.group] == SLIDING:
            self.retained.discard(block.hash)
        self.pages.unregister(block)
        self.num_evictions += 1

    # ---- invariants ---------------------------------------------------------------------

    def check_invariants(self, block_tables: list[list[int]]) -> None:
        """Raise EngineError if the pool disagrees with the live requests' block tables."""
        check_pool(self, block_tables)
