"""A prefix cache of limited capacity with LRU eviction, at trie-node granularity.

Prompts form a trie over segments (as in `prefix.IdealPrefixCache`); each node holds one
segment's tokens and counts them against `capacity_tokens`. A prompt hits the resident prefix of
its path from the root (prefix semantics: a missing node cuts off everything after it), floored to
whole blocks and capped at prompt - 1 tokens. After the lookup the whole prompt becomes resident
and its nodes are touched leaf first, so an ancestor is always more recent than its descendants
and eviction removes tails before heads, as block-level caches (vLLM, the reference engine) do.

Approximation: capacity is charged per segment, not per block; a segment is evicted whole. When
segments are whole blocks (imported traces, or block-aligned lengths) this is exact block LRU.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from harness.trace.content import Segment
from harness.trace.prefix import block_hit

Path = list[tuple[int, int]]  # (node, segment length) from the root: one prompt


class LruPrefixCache:
    def __init__(self, capacity_tokens: int, block_size: int = 16) -> None:
        if capacity_tokens < 0 or block_size <= 0:
            raise ValueError("capacity must be >= 0 and block_size positive")
        self.capacity = capacity_tokens
        self.block_size = block_size
        self.used = 0
        self._nodes: dict[tuple[int, tuple], int] = {}  # (parent node, segment key) -> node
        self._length: list[int] = [0]  # tokens a node holds when resident (longest seen)
        self._resident: OrderedDict[int, None] = OrderedDict()  # LRU order, oldest first

    def _walk(self, segments: Sequence[Segment], node: int) -> int:
        """Resident tokens of `segments` continuing from `node`, stopping at the first miss."""
        shared = 0
        for seg in segments:
            child = self._nodes.get((node, seg.key))
            if child is None or child not in self._resident:
                break
            held = self._length[child]
            shared += min(held, seg.length)
            if held != seg.length:
                break
            node = child
        return shared

    def _node(self, parent: int, seg: Segment) -> int:
        child = self._nodes.get((parent, seg.key))
        if child is None:
            child = self._nodes[(parent, seg.key)] = len(self._length)
            self._length.append(seg.length)
        elif seg.length > self._length[child] and child in self._resident:
            self.used += seg.length - self._length[child]
            self._length[child] = seg.length
        elif child not in self._resident:
            self._length[child] = seg.length
        return child

    def extend(self, path: Path, segments: Sequence[Segment]) -> tuple[int, Path]:
        """Hit tokens of a prompt = the prompt of `path` (from an earlier call) + `segments`.

        Returns the hit and the new prompt's path. A turn that extends its session's previous
        prompt passes that prompt's path and only its new segments, skipping the trie lookups
        for the shared part.
        """
        shared, whole = 0, True
        for node, length in path:
            if node not in self._resident or self._length[node] != length:
                shared += min(length, self._length[node]) if node in self._resident else 0
                whole = False
                break
            shared += length
        last = path[-1][0] if path else 0
        if whole:
            shared += self._walk(segments, last)
        total = sum(length for _, length in path) + sum(s.length for s in segments)
        hit = block_hit(shared, total, self.block_size)
        new_path = list(path)
        for seg in segments:
            last = self._node(last, seg)
            new_path.append((last, seg.length))
        self._touch(new_path)
        return hit, new_path

    def _touch(self, path: Path) -> None:
        for node, _ in path:
            if node not in self._resident:
                self._resident[node] = None
                self.used += self._length[node]
        for node, _ in reversed(path):  # leaf first: ancestors end up most recent
            self._resident.move_to_end(node)
        while self.used > self.capacity and self._resident:
            old, _ = self._resident.popitem(last=False)
            self.used -= self._length[old]

    def observe(self, segments: Sequence[Segment]) -> int:
        """Hit tokens for this prompt, then make it resident. Call in send order."""
        return self.extend([], segments)[0]
