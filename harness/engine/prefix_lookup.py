"""Prefix-cache lookup: block hashes, and the longest cached prefix a request can resume from.

A full block is identified by hash(parent block's hash, its token ids), blake2b with a fixed key,
so equal prefixes hash equal in every process. The pool's resident map is keyed by that hash's
input, (KV group, parent hash, token bytes), so a hit is verified token by token.

A prefix of L = k blocks is a hit only if every full-attention group holds blocks [0, k) and every
sliding-window group holds the window before L: blocks [window_start(L), k) (vLLM's hybrid
coordinator: the full-attention hit bounds the sliding one, which scans back from it).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.engine.config import FULL, SLIDING
from harness.engine.sequence import NULL_BLOCK, TOKEN_BYTES, Request

if TYPE_CHECKING:
    from harness.engine.block_pool import BlockPool

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
        parent = block_hash(parent, bytes(data[i * width : (i + 1) * width]))
        known.append(parent)
    return known


def tier_key(h: bytes, group: int) -> bytes:
    """The tiers' key of a group's block (group 0 keeps the bare hash)."""
    return h if group == 0 else h + group.to_bytes(2, "little")


def window_start(num_tokens: int, window: int, block_size: int) -> int:
    """The first block a sliding layer still reads when `num_tokens` tokens precede the next one."""
    return max(0, num_tokens - window + 1) // block_size if window else 0


@dataclass
class PrefixHit:
    """A cached prefix of `num_blocks` blocks: per KV group, device page ids (int) or tier
    entries (key, parent, tokens, KV, tier) for blocks [first, num_blocks), NULL_BLOCK before
    `first`."""

    num_blocks: int = 0
    tables: list[list[int | tuple[bytes, bytes, bytes, Any, str]]] = field(default_factory=list)
    hashes: list[bytes] = field(default_factory=list)  # of blocks [0, num_blocks)
    num_full_blocks: int = 0  # what the full-attention groups alone hold (>= num_blocks)
    num_restored_blocks: int = 0  # tier entries in every group: device pages taking them needs
    tier_blocks: Counter[str] = field(default_factory=Counter)  # first group's blocks by tier
    num_free_device: int = 0  # device hits now in the free queue (taking them uses free space)

    @property
    def num_cpu_blocks(self) -> int:
        return self.tier_blocks["cpu"]

    @property
    def entries(self) -> list:
        """The first (full-attention) group's entries: one per hit block."""
        return self.tables[0] if self.tables else []


def find_prefix(pool: BlockPool, req: Request) -> PrefixHit:
    """The longest cached prefix, capped so one token is left to compute."""
    hit = PrefixHit(tables=[[] for _ in pool.kinds])
    if not pool.enable_caching:
        return hit
    bs = pool.block_size
    n = (req.num_tokens - 1) // bs
    if len(pool.kinds) == 1 and pool.tiers is None and not pool.hybrid:
        return _device_hit(pool, req, n, hit)
    hashes = hash_blocks(req, bs, n)
    _prefetch(pool, req, hashes, n)
    # Without reclaim, sliding groups keep every block and are looked up like full ones.
    kinds = pool.kinds if pool.reclaim_window else (FULL,) * len(pool.kinds)
    full = [g for g, kind in enumerate(kinds) if kind == FULL]
    sliding = [g for g, kind in enumerate(kinds) if kind == SLIDING]
    found = _full_hit(pool, req, full, n, hashes)  # each full group's entries, looked up once
    k = hit.num_full_blocks = len(found[full[0]]) if full else n
    if sliding:
        k = _sliding_hit(pool, req, sliding, k, hashes)
    hit.num_blocks, hit.hashes = k, hashes[:k]
    first = window_start(k * bs, pool.sliding_window, bs)
    for g, kind in enumerate(kinds):
        if kind == FULL:
            hit.tables[g] = found[g][:k]
            continue
        lo = first
        hit.tables[g] = [NULL_BLOCK] * lo + [_entry(pool, req, g, i, hashes) for i in range(lo, k)]
    _count(pool, hit)
    return hit


def _device_hit(pool: BlockPool, req: Request, n: int, hit: PrefixHit) -> PrefixHit:
    """One full-attention group and no tiers: walk the resident map from the root. A page
    found holds its own hash, the next key's parent, so a hit rehashes nothing; the request's
    hashes past it are computed when its blocks are registered (`BlockPool.cache_blocks`)."""
    # The loop runs once per block of every prompt (~90 a quickstart request, ~9k at 142k
    # tokens): names bound once, no call in it but the map's and the lists' own.
    get, blocks = pool.pages.first.get, pool.blocks
    data, width = bytes(req.token_bytes), pool.block_size * TOKEN_BYTES
    pages: list[int] = []
    add_page, add_hash = pages.append, hit.hashes.append
    parent: bytes | None = ROOT_HASH
    num_free = 0
    for start in range(0, n * width, width):
        page = get((0, parent, data[start : start + width]))  # type: ignore[arg-type]
        if page is None:
            break
        add_page(page)
        block = blocks[page]
        parent = block.hash  # a registered page's: never None
        add_hash(parent)  # type: ignore[arg-type]
        if not block.ref_cnt:
            num_free += 1
    hit.tables[0] = pages  # type: ignore[assignment]
    hit.num_blocks = hit.num_full_blocks = len(pages)
    hit.num_free_device = num_free
    return hit


def _full_hit(
    pool: BlockPool, req: Request, groups: list[int], n: int, hashes: list[bytes]
) -> dict[int, list]:
    """The entries of the longest prefix (< n blocks) every full-attention group holds."""
    found: dict[int, list] = {g: [] for g in groups}
    for k in range(n):
        row = [_entry(pool, req, g, k, hashes) for g in groups]
        if any(e is None for e in row):
            break
        for g, e in zip(groups, row, strict=True):
            found[g].append(e)
    return found


def _sliding_hit(
    pool: BlockPool, req: Request, groups: list[int], k: int, hashes: list[bytes]
) -> int:
    """The largest hit <= k whose window blocks every sliding group holds (scan back once)."""
    bs, window = pool.block_size, pool.sliding_window
    while k > 0:
        lo, j = window_start(k * bs, window, bs), k - 1
        while j >= lo and all(_entry(pool, req, g, j, hashes) is not None for g in groups):
            j -= 1
        if j < lo:
            return k
        k = j  # block j is missing: a hit must end at or before it
    return 0


def _prefetch(pool: BlockPool, req: Request, hashes: list[bytes], n: int) -> None:
    """Ask the shared store, once, for the blocks after those the device and local tiers hold
    (every group's, at most a device's worth)."""
    tiers = pool.tiers
    if tiers is None or tiers.remote is None:
        return
    bs, k = pool.block_size, 0
    while k < n and (
        (0, hashes[k - 1] if k else ROOT_HASH, req.block_tokens(k, bs)) in pool.pages.first
        or tiers.holds_locally(hashes[k])
    ):
        k += 1
    groups = range(len(pool.kinds))
    end = min(n, k + pool.num_blocks // len(pool.kinds))
    tiers.prefetch([tier_key(hashes[i], g) for i in range(k, end) for g in groups])


def _entry(pool: BlockPool, req: Request, g: int, i: int, hashes: list[bytes]):
    """Group g's block i of the request: a device page id, a tier entry, or None."""
    bs = pool.block_size
    parent = hashes[i - 1] if i else ROOT_HASH
    tokens = req.block_tokens(i, bs)
    page = pool.pages.first.get((g, parent, tokens))
    if page is not None:
        return page
    if pool.tiers is None:
        return None
    key = tier_key(hashes[i], g)
    found = pool.tiers.find(key, tokens)
    return None if found is None else (key, parent, tokens, found[1], found[0])


def _count(pool: BlockPool, hit: PrefixHit) -> None:
    for g, table in enumerate(hit.tables):
        for e in table:
            if isinstance(e, tuple):
                hit.num_restored_blocks += 1
                hit.tier_blocks[e[4]] += g == 0
            elif e != NULL_BLOCK:
                hit.num_free_device += pool.blocks[e].ref_cnt == 0
