"""The device KV block pool: reference counts, a hash-chain prefix cache, an LRU free queue.

Semantics follow vLLM's KVCacheManager / FreeKVCacheBlockQueue:
- A full block is identified by hash(parent block's hash, its token ids), blake2b with a fixed key,
  so equal prefixes hash equal in every process. The resident map is keyed by that hash's input,
  (parent hash, token bytes): a hit is verified token by token and a lookup hashes nothing, which
  keeps a 142k-token prompt's walk over ~9k blocks cheap.
- Freed blocks keep their hash ("lazy eviction") and can still be hit until reallocated. The free
  queue is an O(1) LRU (an OrderedDict): allocation pops from the head. A request's blocks are
  freed tail first, so its private tail is evicted before the prefix others may share; blocks
  with no hash (partial) go to the head since they hold nothing reusable.
- A hashed block evicted from the device goes to the CPU tier when one is configured.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.engine.cpu_tier import CpuTier
from harness.engine.sequence import TOKEN_BYTES, Request
from harness.errors import EngineError

_HASH_KEY = b"agentic-harness-kv"  # fixed: hashes are equal across processes and runs
ROOT_HASH = b"\0" * 16


def block_hash(parent: bytes, tokens: bytes) -> bytes:
    """The hash of a full block: its parent's hash and its token ids (int32 little-endian)."""
    return hashlib.blake2b(parent + tokens, digest_size=16, key=_HASH_KEY).digest()


def hash_blocks(req: Request, block_size: int, num_blocks: int) -> list[bytes]:
    """The request's block hashes, extended (once, then remembered) to `num_blocks` blocks."""
    known, width = req.block_hashes, block_size * TOKEN_BYTES
    parent = known[-1] if known else ROOT_HASH
    data = req.token_bytes
    for i in range(len(known), num_blocks):
        parent = block_hash(parent, bytes(data[i * width:(i + 1) * width]))
        known.append(parent)
    return known


class KVMover(Protocol):
    """The runner's copy of one block's KV out of / into the device cache."""

    def save_block(self, block_id: int) -> Any: ...
    def load_block(self, block_id: int, payload: Any) -> None: ...


@dataclass(slots=True)
class Block:
    block_id: int
    ref_cnt: int = 0
    hash: bytes | None = None
    parent: bytes | None = None  # the previous block's hash (ROOT_HASH for the first)
    tokens: bytes | None = None  # its token ids (int32 little-endian)


@dataclass
class PrefixHit:
    """A cached chain in order: device block ids (int) and CPU-tier blocks (hash, tokens, KV)."""

    entries: list[int | tuple[bytes, bytes, bytes, Any]] = field(default_factory=list)
    hashes: list[bytes] = field(default_factory=list)  # of each entry
    num_cpu_blocks: int = 0
    num_free_device: int = 0  # device hits now in the free queue (taking them uses free space)

    def add_device(self, block: Block) -> None:
        self.entries.append(block.block_id)
        self.hashes.append(block.hash)
        self.num_free_device += block.ref_cnt == 0

    @property
    def device_blocks(self) -> list[int]:
        return [e for e in self.entries if isinstance(e, int)]


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int, *, enable_caching: bool = True,
                 cpu_tier: CpuTier | None = None, mover: KVMover | None = None) -> None:
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.cached: dict[tuple[bytes, bytes], int] = {}  # (parent hash, tokens) -> block id
        self.cpu_tier = cpu_tier
        self.mover = mover
        self.num_evictions = 0
        self.num_frees = 0  # free() calls: the only event that can give a blocked request room

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free(self) -> int:
        return len(self.free_queue)

    @property
    def usage(self) -> float:
        return 1.0 - self.num_free / self.num_blocks

    # ---- prefix lookup ------------------------------------------------------------------

    def find_prefix(self, req: Request) -> PrefixHit:
        """The longest cached chain for the request, capped so one token is left to compute."""
        hit = PrefixHit()
        if not self.enable_caching:
            return hit
        bs, parent = self.block_size, ROOT_HASH
        n = (req.num_tokens - 1) // bs
        self._revalidate(req.last_hit, hit, n)
        if hit.entries:
            parent = hit.hashes[-1]
        for i in range(len(hit.entries), n):
            tokens = req.block_tokens(i, bs)
            block_id = self.cached.get((parent, tokens))
            if block_id is not None:
                hit.add_device(self.blocks[block_id])
                parent = hit.hashes[-1]
                continue
            if self.cpu_tier is None:
                break
            h = req.block_hashes[i] if i < len(req.block_hashes) else block_hash(parent, tokens)
            cpu = self.cpu_tier.get(h, tokens)
            if cpu is None:
                break
            hit.entries.append((h, parent, tokens, cpu.payload))
            hit.hashes.append(h)
            hit.num_cpu_blocks += 1
            parent = h
        req.last_hit = hit
        return hit

    def _revalidate(self, last: PrefixHit | None, hit: PrefixHit, n: int) -> None:
        """Reuse the leading device blocks of the request's previous lookup that still hold the
        same content. A waiting head is looked up every step; this makes a retry over a
        142k-token prompt cost an identity check per block instead of a map lookup."""
        if last is None:
            return
        for entry, h in zip(last.entries[:n], last.hashes, strict=False):
            if not isinstance(entry, int):
                return
            block = self.blocks[entry]
            if block.hash is not h:  # evicted (None) or re-registered since
                return
            hit.add_device(block)

    def frontier(self, req: Request, hit: PrefixHit) -> tuple | None:
        """The next block after the hit, as (map key, hash); None if the hit cannot grow."""
        i, bs = len(hit.entries), self.block_size
        if not self.enable_caching or i >= (req.num_tokens - 1) // bs:
            return None
        parent = hit.hashes[-1] if hit.entries else ROOT_HASH
        tokens = req.block_tokens(i, bs)
        return (parent, tokens), block_hash(parent, tokens)

    def could_grow(self, frontier: tuple | None) -> bool:
        """Whether a hit that stopped at `frontier` could now be longer (its next block cached)."""
        if frontier is None:
            return False
        key, h = frontier
        return key in self.cached or (self.cpu_tier is not None and h in self.cpu_tier)

    def can_take(self, hit: PrefixHit, num_new_blocks: int) -> bool:
        # Touching a free hit block removes it from the free queue, so it no longer counts.
        return hit.num_cpu_blocks + num_new_blocks <= self.num_free - hit.num_free_device

    def take(self, req: Request, hit: PrefixHit) -> None:
        """Give the request the hit's blocks: share device ones, copy CPU-tier ones back."""
        # Touch every device hit first so allocating for the CPU ones cannot evict them.
        self._touch(hit.device_blocks)
        req.block_table = []
        for entry in hit.entries:
            if isinstance(entry, int):
                req.block_table.append(entry)
                continue
            h, parent, tokens, payload = entry
            (block_id,) = self._allocate(1)
            if self.mover is not None:
                self.mover.load_block(block_id, payload)
            self._register(self.blocks[block_id], h, parent, tokens)
            req.block_table.append(block_id)
        if len(req.block_hashes) < len(hit.hashes):  # the hit's hashes come free: no rehashing
            req.block_hashes[:] = hit.hashes
        req.num_cached_blocks = len(hit.entries)
        req.last_hit = None

    # ---- allocation ---------------------------------------------------------------------

    def blocks_needed(self, req: Request, num_new_tokens: int) -> int:
        total = -(-(req.num_computed_tokens + num_new_tokens) // self.block_size)
        return max(0, total - len(req.block_table))

    def allocate_slots(self, req: Request, num_new_tokens: int) -> bool:
        """Grow the request's block table to hold `num_new_tokens` more; False if no room."""
        need = self.blocks_needed(req, num_new_tokens)
        if need > self.num_free:
            return False
        req.block_table.extend(self._allocate(need))
        return True

    def free(self, req: Request) -> None:
        self.num_frees += 1
        for block_id in reversed(req.block_table):
            block = self.blocks[block_id]
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                self.free_queue[block_id] = None
                if block.hash is None:
                    self.free_queue.move_to_end(block_id, last=False)
        req.block_table = []
        req.num_cached_blocks = 0

    def cache_blocks(self, req: Request) -> None:
        """Hash and register the request's blocks that are now full and computed."""
        if not self.enable_caching:
            return
        bs = self.block_size
        n_full = req.num_computed_tokens // bs
        hashes = hash_blocks(req, bs, n_full)
        for i in range(req.num_cached_blocks, n_full):
            block = self.blocks[req.block_table[i]]
            parent, tokens = hashes[i - 1] if i else ROOT_HASH, req.block_tokens(i, bs)
            # A block another request registered first stays unhashed: one block per content.
            if block.hash is None and (parent, tokens) not in self.cached:
                self._register(block, hashes[i], parent, tokens)
        req.num_cached_blocks = max(req.num_cached_blocks, n_full)

    def _touch(self, block_ids: list[int]) -> None:
        for block_id in block_ids:
            block = self.blocks[block_id]
            if block.ref_cnt == 0:
                del self.free_queue[block_id]
            block.ref_cnt += 1

    def _allocate(self, n: int) -> list[int]:
        out = []
        for _ in range(n):
            block_id, _ = self.free_queue.popitem(last=False)
            block = self.blocks[block_id]
            if block.hash is not None:
                self._evict(block)
            block.ref_cnt = 1
            out.append(block_id)
        return out

    def _evict(self, block: Block) -> None:
        del self.cached[(block.parent, block.tokens)]
        if self.cpu_tier is not None and self.cpu_tier.capacity > 0:
            payload = self.mover.save_block(block.block_id) if self.mover is not None else None
            self.cpu_tier.put(block.hash, block.tokens, payload)
        block.hash = block.parent = block.tokens = None
        self.num_evictions += 1

    def _register(self, block: Block, h: bytes, parent: bytes, tokens: bytes) -> None:
        block.hash, block.parent, block.tokens = h, parent, tokens
        self.cached[(parent, tokens)] = block.block_id

    # ---- invariants ---------------------------------------------------------------------

    def check_invariants(self, block_tables: list[list[int]]) -> None:
        """Raise EngineError if the pool disagrees with the live requests' block tables."""
        refs = Counter(b for table in block_tables for b in table)
        for block in self.blocks:
            if block.ref_cnt != refs.get(block.block_id, 0):
                raise EngineError(f"block {block.block_id}: ref_cnt {block.ref_cnt} != {refs.get(block.block_id, 0)} holders")
            if (block.ref_cnt == 0) != (block.block_id in self.free_queue):
                raise EngineError(f"block {block.block_id}: ref_cnt {block.ref_cnt} but in free queue: {block.block_id in self.free_queue}")
            if block.hash is not None and self.cached.get((block.parent, block.tokens)) != block.block_id:
                raise EngineError(f"block {block.block_id}: its content is not mapped to it")
            if (block.hash is None) != (block.tokens is None):
                raise EngineError(f"block {block.block_id}: hash and token ids disagree")
        for (parent, tokens), block_id in self.cached.items():
            block = self.blocks[block_id]
            if (block.parent, block.tokens) != (parent, tokens) or block.hash != block_hash(parent, tokens):
                raise EngineError(f"hash map entry points at block {block_id} with other content")
        if self.cpu_tier is not None and len(self.cpu_tier) > self.cpu_tier.capacity:
            raise EngineError("CPU tier holds more blocks than its capacity")
