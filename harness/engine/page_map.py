"""The device pool's pages and which of them holds each block's content.

`Block` is one page's record: its reference count, and once registered, the content it holds
(its hash, its parent's hash and its token ids) and the KV group it served. `PageMap` is the
pool's hash map, vLLM's `BlockHashToBlockMap`: (group, parent hash, token ids) -> the page that
lookups get. vLLM keeps every page of one content ("we don't de-duplicate"); with
`keep_duplicates` so does this map, the later pages waiting behind the first, oldest first, each
taking its place when the one before it is evicted. Allocation, freeing and the LRU stay with
the pool (`block_pool.py`); the lookups that walk this map are in `prefix_lookup.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Key = tuple[int, bytes, bytes]  # (group, parent hash, token ids)
# Told of every content the map gains ("stored") or loses ("removed"), as vLLM's BlockStored and
# BlockRemoved events are; None (the default) costs nothing (benchmarks/vllm_kv_events.py).
Listener = Callable[[str, "Block"], None]


@dataclass(slots=True)
class Block:
    block_id: int
    ref_cnt: int = 0
    hash: bytes | None = None
    parent: bytes | None = None  # the previous block's hash (ROOT_HASH for the first)
    tokens: bytes | None = None  # its token ids (int32 little-endian)
    group: int = 0  # the KV group it last served

    def key(self) -> Key:
        """Its entry in the pool's hash map (group, parent, tokens); only for a hashed block."""
        assert self.parent is not None and self.tokens is not None, (
            f"block {self.block_id} unhashed"
        )
        return self.group, self.parent, self.tokens


class PageMap:
    """Content -> page: `first` is what lookups read (a plain dict, walked once per block of
    every prompt), `duplicates` the pages of the same content behind it."""

    __slots__ = ("first", "duplicates", "keep_duplicates", "listener")

    def __init__(self, keep_duplicates: bool = False) -> None:
        self.first: dict[Key, int] = {}
        self.duplicates: dict[Key, list[int]] = {}
        self.keep_duplicates = keep_duplicates
        self.listener: Listener | None = None

    def __len__(self) -> int:
        return len(self.first)

    def register(
        self, block: Block, h: bytes, parent: bytes, tokens: bytes, duplicate: bool = False
    ) -> None:
        """`block` now holds this content: it serves lookups, or (`duplicate`) waits behind the
        page that does. Whether a second page of one content is kept at all is the caller's
        (`keep_duplicates`; else it stays unhashed)."""
        block.hash, block.parent, block.tokens = h, parent, tokens
        key = (block.group, parent, tokens)
        if duplicate:
            self.duplicates.setdefault(key, []).append(block.block_id)
        else:
            self.first[key] = block.block_id
        if self.listener is not None:
            self.listener("stored", block)

    def unregister(self, block: Block) -> None:
        """`block` holds nothing any more; the next oldest page of its content serves lookups."""
        if self.listener is not None:
            self.listener("removed", block)
        key, page = block.key(), block.block_id
        others = self.duplicates.get(key)
        if others is None:
            del self.first[key]
        elif self.first[key] == page:
            self.first[key] = others.pop(0)
        else:
            others.remove(page)
        if others is not None and not others:
            del self.duplicates[key]
        block.hash = block.parent = block.tokens = None

    def pages_of(self, block: Block) -> list[int]:
        """The pages this map holds for a block's content (the one lookups get first)."""
        if block.parent is None or block.tokens is None:
            return []
        key = block.key()
        first = self.first.get(key)
        return ([] if first is None else [first]) + self.duplicates.get(key, [])

    def entries(self) -> list[tuple[Key, int]]:
        """Every (content, page) the map holds, duplicates included."""
        return [*self.first.items(), *((k, p) for k, ps in self.duplicates.items() for p in ps)]
