"""Prefix-cache hits of block-mode prompts (imported Mooncake / Weka traces) at corpus scale.

A real agentic corpus has ~50k requests of ~120k tokens: ~90 million 64-token blocks if every
prompt were walked from its start. But a session's prompt is almost always its previous prompt
plus a few dozen blocks, so `BlockPaths` keeps each live session's last prompt as an array of
trie nodes and only looks up the blocks a request adds (`HashIds` stores exactly those). The
hit computations then run over the node arrays with numpy. Results equal `IdealPrefixCache` and
`LruPrefixCache` over the prompts' block segments (a test checks it); only the speed differs.

Trie: node 0 is the empty prompt; `(parent node, block id)` names a child (packed into one int). A block shorter than
`block_size` (a prompt's partial last block) is the same node as the full block; each cache keeps
the length it holds per node, as the segment caches do.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from harness.trace.blocks import HashIds, common_prefix
from harness.trace.model import Trace, Turn
from harness.trace.prefix import block_hit

_ID_MASK = (1 << 64) - 1


class _Column:
    """A numpy array indexed by node that grows with the trie."""

    def __init__(self, dtype) -> None:
        self.a = np.zeros(1024, dtype=dtype)

    def fit(self, n: int) -> np.ndarray:
        if n > len(self.a):
            grown = np.zeros(max(n, 2 * len(self.a)), dtype=self.a.dtype)
            grown[: len(self.a)] = self.a
            self.a = grown
        return self.a


@dataclass
class Path:
    nodes: np.ndarray  # trie node per block (then one private node for tokens past the ids)
    lengths: np.ndarray  # tokens per node
    known: int  # nodes[:known] existed before this prompt
    total: int  # prompt tokens
    ref: str | None  # the session whose last prompt this one was walked from (itself or its parent)
    shared: int  # leading blocks taken from that prompt's path
    ref_blocks: int  # blocks of that prompt
    blocks: int  # blocks of this prompt (its ids; `nodes` may end with one more for the rest)


class Families:
    """Which main session each session belongs to, and when a family has sent its last request."""

    def __init__(self, trace: Trace) -> None:
        self.root = {m.id: s.id for s in trace.main_sessions for m in trace.family(s.id)}
        self._left = {
            s.id: sum(len(m.turns) for m in trace.family(s.id)) for s in trace.main_sessions
        }
        for s in trace.sessions:  # a subagent whose parent lists it nowhere is a family of its own
            if s.id not in self.root:
                self.root[s.id], self._left[s.id] = s.id, len(s.turns)

    def sent(self, sid: str) -> bool:
        """Count one request of `sid`'s family; True when that was the family's last."""
        family = self.root[sid]
        self._left[family] -= 1
        return self._left[family] == 0


class BlockPaths:
    """Trie paths of block-mode prompts. With `private` families (local-scope Weka ids: a trace's
    blocks are its own), a family's trie entries are dropped once it has sent its last request
    (`finish`): no later prompt can reach them, so memory follows the live families."""

    def __init__(self, block_size: int, *, private: bool = False) -> None:
        self.block_size = block_size
        self.nodes = 1
        self._child: dict[int, int] = {}  # parent node << 64 | block id (as unsigned) -> node
        self._keys: dict[str, list[int]] | None = {} if private else None  # family -> its entries
        self._last: dict[
            str, tuple[HashIds | None, np.ndarray, np.ndarray]
        ] = {}  # ids obj, ids, nodes
        self.ref: str | None = None

    def _ids(self, sid: str, hash_ids, parent: str | None) -> tuple[np.ndarray, np.ndarray, int]:
        """(ids, a reference prompt's nodes, blocks shared with it). The reference is the session's
        previous prompt, or for its first the parent's latest (a subagent starts from there)."""
        self.ref = sid if sid in self._last else parent if parent in self._last else None
        if self.ref is None:
            ref_obj, ref_ids, ref_nodes = None, np.zeros(0, np.int64), np.zeros(0, np.int64)
        else:
            ref_obj, ref_ids, ref_nodes = self._last[self.ref]
        if isinstance(hash_ids, HashIds) and ref_obj is not None and hash_ids.base is ref_obj:
            return (
                np.concatenate((ref_ids[: hash_ids.keep], hash_ids.tail)),
                ref_nodes,
                hash_ids.keep,
            )
        ids = (
            hash_ids.array()
            if isinstance(hash_ids, HashIds)
            else np.asarray(list(hash_ids), dtype=np.int64)
        )
        return ids, ref_nodes, common_prefix(ids, ref_ids)

    def walk(
        self,
        sid: str,
        turn: Turn,
        *,
        parent: str | None = None,
        last: bool = False,
        family: str | None = None,
    ) -> Path:
        """The trie path of a block-mode turn's prompt; `last`: the session sends no more;
        `family`: its main session (for `finish`)."""
        total, b = int(turn.input_tokens or 0), self.block_size
        ids, prev_nodes, shared = self._ids(sid, turn.hash_ids, parent)
        n = min(len(ids), -(-total // b))
        shared = min(shared, n, len(prev_nodes))
        nodes = np.empty(n + 1, dtype=np.int64)
        nodes[:shared] = prev_nodes[:shared]
        node = int(nodes[shared - 1]) if shared else 0  # the trie node the walk is at
        known: int | None = None  # the first block not in the trie
        child, walked = self._child, []
        keys = self._keys.setdefault(family or sid, []) if self._keys is not None else None
        for i, h in enumerate(ids[shared:n].tolist(), start=shared):
            key = node << 64 | h & _ID_MASK  # one int, not a tuple: the trie has millions of nodes
            got = child.get(key)
            if got is None:
                known = i if known is None else known
                got = child[key] = self.nodes
                self.nodes += 1
                if keys is not None:
                    keys.append(key)
            node = got
            walked.append(node)
        nodes[shared:n] = walked
        lengths = np.full(n + 1, b, dtype=np.int64)
        lengths[n] = max(0, total - n * b)  # tokens the ids do not cover: a private node
        if n:
            lengths[n - 1] = min(b, total - (n - 1) * b)
        nodes[n] = self.nodes
        self.nodes += 1
        if lengths[n] == 0:
            nodes, lengths = nodes[:n], lengths[:n]
        if last:
            self._last.pop(sid, None)
        else:
            self._last[sid] = (
                turn.hash_ids if isinstance(turn.hash_ids, HashIds) else None,
                ids,
                nodes[:n],
            )
        return Path(
            nodes,
            lengths,
            n if known is None else known,
            total,
            self.ref,
            shared,
            len(prev_nodes),
            n,
        )

    def finish(self, family: str) -> None:
        """A private family sent its last request: forget its trie entries."""
        if self._keys is not None:
            for key in self._keys.pop(family, ()):
                del self._child[key]


def _resident_prefix(ok: np.ndarray, held: np.ndarray, lengths: np.ndarray, stop: int) -> int:
    """Tokens of the leading run of `ok` nodes, plus what the first other node holds (< stop)."""
    j = int(np.argmin(ok[:stop])) if stop else 0
    if j < stop and ok[j]:
        j = stop  # all ok
    shared = int(lengths[:j].sum())
    if j < stop:
        shared += int(min(held[j], lengths[j]))
    return shared


class IdealBlocks:
    """`IdealPrefixCache` on block paths: a prompt hits its longest prefix any earlier one had."""

    def __init__(self, block_size: int, paths_block: int) -> None:
        self.block_size, self.paths_block = block_size, paths_block  # cache block, hash-id block
        self._longest = _Column(np.int64)  # longest length seen per node

    def observe(self, p: Path, nodes: int) -> int:
        """`nodes`: how many the trie has (`BlockPaths.nodes`)."""
        longest = self._longest.fit(nodes)
        # Blocks taken from the reference prompt, before either prompt's last, are whole blocks
        # that prompt already put in: they hit, and there is nothing to update.
        whole = max(0, min(p.shared, p.ref_blocks - 1, p.blocks - 1))
        rest, lengths = p.nodes[whole:], p.lengths[whole:]
        seen = longest[rest]
        shared = whole * self.paths_block + _resident_prefix(
            seen == lengths, seen, lengths, p.known - whole
        )
        longest[rest] = np.maximum(seen, lengths)
        return block_hit(shared, p.total, self.block_size)


class LruBlocks:
    """`LruPrefixCache` on block paths, exact and vectorized.

    Each request touches its whole path, leaf first, so recency orders nodes by (request, depth):
    an older request's nodes go first, and within one request the deepest. Instead of moving
    every node of every prompt in an ordered dict, a node records the request that last touched
    it and each request is an event holding its path; eviction takes the oldest event's nodes
    that no later request touched, deepest first. A session's new request shrinks its previous
    event to what the new prompt does not repeat, so events hold little more than live prompts.
    """

    def __init__(self, capacity_tokens: int, block_size: int) -> None:
        if capacity_tokens < 0:
            raise ValueError("capacity must be >= 0")
        self.capacity, self.block_size, self.used = capacity_tokens, block_size, 0
        self._held, self._touched = _Column(np.int64), _Column(np.int64)  # held 0: not resident
        self._events: deque[list] = deque()  # [request number, nodes], oldest first
        self._session_event: dict[str, list] = {}
        self._clock = 0

    def observe(self, sid: str, p: Path, nodes: int) -> int:
        """`nodes`: how many the trie has (`BlockPaths.nodes`)."""
        held, touched = self._held.fit(nodes), self._touched.fit(nodes)
        had = held[p.nodes]  # tokens resident per node (0: not resident)
        shared = _resident_prefix(had == p.lengths, had, p.lengths, len(p.nodes))
        now = np.maximum(had, p.lengths)  # a resident partial block may have filled up
        self.used += int(now.sum()) - int(had.sum())
        held[p.nodes] = now
        self._clock += 1
        touched[p.nodes] = self._clock
        self._record(sid, p.nodes)
        self._evict()
        return block_hit(shared, p.total, self.block_size)

    def _record(self, sid: str, nodes: np.ndarray) -> None:
        prev = self._session_event.get(sid)
        if prev is not None:  # keep only what this request did not touch again
            prev[1] = prev[1][self._touched.a[prev[1]] != self._clock]
        event = [self._clock, nodes]
        self._events.append(event)
        self._session_event[sid] = event

    def _evict(self) -> None:
        held, touched = self._held.a, self._touched.a
        while self.used > self.capacity and self._events:
            clock, nodes = self._events[0]
            mine = nodes[(touched[nodes] == clock) & (held[nodes] > 0)][::-1]  # deepest first
            freed = np.cumsum(held[mine])
            k = int(np.searchsorted(freed, self.used - self.capacity)) + 1  # nodes to evict
            gone = mine[:k]
            self.used -= int(held[gone].sum())
            held[gone] = 0
            if k >= len(mine):
                self._events.popleft()
            else:
                self._events[0][1] = mine[k:][::-1]

    def forget(self, sid: str) -> None:
        self._session_event.pop(sid, None)
