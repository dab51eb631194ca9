"""The CPU tier: KV blocks evicted from the device pool, kept in host memory by content hash.

An LRU of `capacity` blocks; what it evicts goes on to the disk tier when there is one. A device eviction of a hashed block stores (token ids, KV payload)
here; a prefix lookup that misses on the device continues its hash chain here, and a hit is copied
back into a fresh device block. The payload is whatever the runner's KV mover saved (host tensors
for the torch runner, nothing for the simulated runner).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CpuBlock:
    tokens: bytes
    payload: Any


class CpuTier:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._blocks: OrderedDict[bytes, CpuBlock] = OrderedDict()
        self.num_stored = 0  # blocks written here over the tier's life
        self.num_evicted = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block_hash: bytes) -> bool:
        return block_hash in self._blocks

    def put(self, block_hash: bytes, tokens: bytes, payload: Any) -> list[tuple[bytes, CpuBlock]]:
        """Store a block; the blocks its LRU evicted to make room (they go on to the disk tier)."""
        self._blocks[block_hash] = CpuBlock(tokens, payload)
        self._blocks.move_to_end(block_hash)
        self.num_stored += 1
        evicted = []
        while len(self._blocks) > self.capacity:
            evicted.append(self._blocks.popitem(last=False))
            self.num_evicted += 1
        return evicted

    def get(self, block_hash: bytes, tokens: bytes) -> CpuBlock | None:
        """The block if resident and its tokens match (a hit refreshes its LRU position)."""
        block = self._blocks.get(block_hash)
        if block is None or block.tokens != tokens:
            return None
        self._blocks.move_to_end(block_hash)
        return block

    def hashes(self) -> list[bytes]:
        """Resident hashes, least recently used first."""
        return list(self._blocks)
