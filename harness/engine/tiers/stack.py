"""The tiers below the device pool, in order: CPU memory, disk, a store shared by replicas.

A hashed block evicted from the device goes to the first local tier (the CPU tier, else the
disk tier); the CPU tier's own LRU evictions go on to the disk tier; the disk tier's are dropped.
The remote store is write-through: every full block is put there once computed (see
`remote`). A prefix lookup that misses on the device asks the tiers in that order, and a hit
is copied back into a fresh device page (it takes device KV capacity like any other block).

Every move is counted by tier and direction ("in": into the tier, "out": back to the device),
in blocks and bytes (the page's KV bytes, what a real runner moves); the simulated runner charges
the moves of a step at its cost model's per-tier bandwidth (`cost_model.TransferCost`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from harness.engine.tiers.cpu import CpuTier
from harness.engine.tiers.disk import DiskTier
from harness.engine.tiers.remote import RemoteTier

TIERS = ("device", "cpu", "disk", "remote")  # where a cached token's KV came from
OFFLOAD_TIERS = TIERS[1:]


class BlockMover(Protocol):
    """The runner's copies of one page's KV out of / into the device cache, and its bytes."""

    def save_block(self, block_id: int) -> Any: ...
    def load_block(self, block_id: int, payload: Any) -> None: ...
    def encode_block(self, payload: Any) -> bytes: ...
    def decode_block(self, data: bytes) -> Any: ...


class KVTiers:
    def __init__(
        self,
        mover: BlockMover,
        page_bytes: int,
        *,
        cpu: CpuTier | None = None,
        disk: DiskTier | None = None,
        remote: RemoteTier | None = None,
    ) -> None:
        self.mover = mover
        self.page_bytes = page_bytes
        self.cpu, self.disk, self.remote = cpu, disk, remote
        self.blocks_moved: Counter[tuple[str, str]] = Counter()  # (tier, "in"|"out") -> blocks
        self._step_moves: Counter[tuple[str, str]] = Counter()  # since the last drain

    @property
    def local(self) -> bool:
        """Whether a device eviction has somewhere to go."""
        return self.cpu is not None or self.disk is not None

    def bytes_moved(self, tier: str, direction: str) -> int:
        return self.blocks_moved[tier, direction] * self.page_bytes

    def _moved(self, tier: str, direction: str, n: int = 1) -> None:
        self.blocks_moved[tier, direction] += n
        self._step_moves[tier, direction] += n

    def drain_moves(self) -> Counter[tuple[str, str]]:
        """The moves since the last call (the simulated runner charges them to its next step)."""
        moves, self._step_moves = self._step_moves, Counter()
        return moves

    # ---- into the tiers -----------------------------------------------------------------

    def offload(self, key: bytes, tokens: bytes, page: int) -> None:
        """A device eviction of a hashed page."""
        payload = self.mover.save_block(page)
        if self.cpu is not None:
            self._moved("cpu", "in")
            for old_key, block in self.cpu.put(key, tokens, payload):
                self._to_disk(old_key, block.tokens, block.payload)
        elif self.disk is not None:
            self._to_disk(key, tokens, payload)

    def _to_disk(self, key: bytes, tokens: bytes, payload: Any) -> None:
        if self.disk is not None:
            self.disk.put(key, tokens, self.mover.encode_block(payload))
            self._moved("disk", "in")

    def write_through(self, key: bytes, tokens: bytes, page: int) -> None:
        """A block just computed: to the shared store, if there is one."""
        if self.remote is not None:
            data = self.mover.encode_block(self.mover.save_block(page))
            self.remote.put(key, tokens, data)
            self._moved("remote", "in")

    def flush(self) -> None:
        if self.remote is not None:
            self.remote.flush()

    # ---- lookups and restores -----------------------------------------------------------

    def holds_locally(self, key: bytes) -> bool:
        return (self.cpu is not None and key in self.cpu) or (
            self.disk is not None and key in self.disk
        )

    def contains(self, key: bytes) -> bool:
        """Whether some tier may serve `key` (the remote store is asked)."""
        return self.holds_locally(key) or (self.remote is not None and self.remote.contains(key))

    def find(self, key: bytes, tokens: bytes) -> tuple[str, Any] | None:
        """(tier, KV payload) of the first tier holding the block with these token ids."""
        if self.cpu is not None and (block := self.cpu.get(key, tokens)) is not None:
            return "cpu", block.payload
        if self.disk is not None and (data := self.disk.get(key, tokens)) is not None:
            return "disk", self.mover.decode_block(data)
        if self.remote is not None and (data := self.remote.get(key, tokens)) is not None:
            return "remote", self.mover.decode_block(data)
        return None

    def prefetch(self, keys: list[bytes]) -> None:
        if self.remote is not None and keys:
            self.remote.prefetch(keys)

    def restore(self, tier: str, key: bytes, page: int, payload: Any) -> None:
        self.mover.load_block(page, payload)
        self._moved(tier, "out")
        if tier == "remote" and self.remote is not None:
            self.remote.taken(key)

    def resident(self) -> dict[str, int]:
        """Blocks each local tier holds now."""
        return {"cpu": len(self.cpu or ()), "disk": len(self.disk or ())}

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
