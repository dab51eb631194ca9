"""Chained block hash ids of prompts, as Mooncake-style traces publish them.

A prompt's tokens are cut into blocks of `block_size` (the last one may be partial); a block's id
names its content *and* everything before it, so equal prompts prefixes give equal leading ids.
Ids are small consecutive integers in first-seen order, like the published traces.

Content is a seeded function of segment keys (see `content.py`), so a block's content is named
exactly by the pieces of segments it holds: `(segment key, start, end)`. Hashing those pieces
instead of the token ids gives the same ids as hashing `Content.prompt_token_ids` (a test checks
it) without materializing 142k-token prompts. Walking a prompt is memoized per segment, so a
turn that extends the previous turn's prompt only cuts its new segments into blocks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from harness.trace.content import Segment
from harness.trace.model import Turn

# Local-scope Weka ids are private to their trace: the loader adds `trace index << LOCAL_BITS`
# so that two traces' block 1 are different blocks; `id & LOCAL_MASK` gives the id back.
LOCAL_BITS = 40
LOCAL_MASK = (1 << LOCAL_BITS) - 1


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two id arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = a[:n] != b[:n]
    i = int(differ.argmax())
    return i if differ[i] else n


class HashIds(Sequence[int]):
    """A block-mode prompt's hash ids, stored as what they add to the session's previous prompt.

    Consecutive prompts of a session share almost all their blocks (a 120k-token prompt is ~1,900
    64-token blocks, of which a turn adds a few dozen), so each prompt keeps `keep` leading ids of
    `base` (the previous prompt's `HashIds`) plus its own `tail`: a 49k-request corpus holds a
    few million ids instead of ~90 million. It compares equal to the tuple of its ids.
    """

    __slots__ = ("base", "keep", "tail", "_len")

    def __init__(self, tail: np.ndarray, base: HashIds | None = None, keep: int = 0) -> None:
        self.base, self.keep, self.tail = base, keep, tail
        self._len = keep + len(tail)

    @classmethod
    def after(cls, ids: np.ndarray, prev: HashIds | None, prev_ids: np.ndarray | None) -> HashIds:
        """`ids` stored against the previous prompt (`prev`, whose ids are `prev_ids`)."""
        if prev is None or prev_ids is None:
            return cls(ids)
        keep = common_prefix(ids, prev_ids)
        return cls(ids[keep:].copy(), prev, keep)

    def array(self) -> np.ndarray:
        parts, end = [], self._len
        node: HashIds | None = self
        while node is not None and end > 0:
            own = node.tail[: max(0, end - node.keep)]
            parts.append(own)
            end = min(end, node.keep)
            node = node.base
        parts.reverse()
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        return iter(self.array().tolist())

    def __getitem__(self, i):
        got = self.array()[i]
        return got.tolist() if isinstance(got, np.ndarray) else int(got)

    def __eq__(self, other) -> bool:
        if isinstance(other, HashIds | tuple | list):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"HashIds({tuple(self)!r})"


def id_array(values: list) -> np.ndarray | None:
    """Block ids as int64, or None when one is not a 64-bit integer (the caller names which)."""
    if not values:
        return np.zeros(0, dtype=np.int64)
    try:
        arr = np.array(values)
    except (OverflowError, ValueError):
        return None
    return arr.astype(np.int64, copy=False) if arr.dtype.kind == "i" and arr.ndim == 1 else None


def bad_id(values: list) -> int:
    """Index of the first id that is not an integer (for the error message)."""
    for i, h in enumerate(values):
        if isinstance(h, bool) or not isinstance(h, int) or not -(2**63) <= h < 2**63:
            return i
    return 0


class IdChain:
    """A session's prompts' id lists, in order, as `HashIds` that share their common prefixes.

    Parsed JSON gives Python lists; converting each 2,000-id list to numpy costs more than parsing
    it. A prompt usually repeats all but the last of the previous prompt's ids, which one list
    comparison confirms, so only the ids it adds are converted (and checked)."""

    def __init__(self, offset: int | None = None) -> None:
        self.offset = offset  # added to every id (local scope), which must then be in [0, 2^40)
        self._list: list | None = None
        self._ids: HashIds | None = None

    def add(self, values: list) -> HashIds:
        """Raises ValueError(index) for an id that is not an integer or is out of range."""
        prev, prev_ids = self._list, self._ids
        k = len(prev) - 1 if prev else 0
        if prev and prev_ids is not None and k > 0 and len(values) > k and values[:k] == prev[:k]:
            keep = k + 1 if values[k] == prev[k] else k
            ids = HashIds(self._checked(values[keep:], keep), prev_ids, keep)
        else:
            ids = HashIds.after(
                self._checked(values, 0),
                prev_ids,
                prev_ids.array() if prev_ids is not None else None,
            )
        self._list, self._ids = values, ids
        return ids

    def _checked(self, values: list, start: int) -> np.ndarray:
        arr = id_array(values)
        if arr is None:
            raise ValueError(start + bad_id(values))
        if self.offset is not None and len(arr):
            if arr.min() < 0 or arr.max() >> LOCAL_BITS:
                raise ValueError(
                    start + int(np.flatnonzero((arr < 0) | (arr >> LOCAL_BITS != 0))[0])
                )
            arr += self.offset
        return arr


class BlockHasher:
    def __init__(self, block_size: int) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.block_size = block_size
        self._ids: dict[tuple, int] = {}  # (previous block id, pieces) -> block id
        self._next_id = 0
        # Walk states: after consuming a segment sequence. State 0 is the empty prompt.
        self._parent: list[int] = [0]
        self._added: list[tuple[int, ...]] = [()]  # full-block ids the step to this state added
        self._chain: list[int] = [-1]  # id of the last full block
        self._pending: list[tuple] = [()]  # pieces of the open (partial) block
        self._step: dict[tuple, int] = {}  # (state, segment key, length) -> state

    def block_id(self, prev: int, pieces: tuple) -> int:
        key = (prev, pieces)
        got = self._ids.get(key)
        if got is None:
            got = self._ids[key] = self._next_id
            self._next_id += 1
        return got

    def forget(self, keys) -> None:
        """Drop `block_id(-2, key)` entries no later prompt can name (their ids stay taken)."""
        for key in keys:
            self._ids.pop((-2, key), None)

    def _advance(self, state: int, seg: Segment) -> int:
        step_key = (state, seg.key, seg.length)
        nxt = self._step.get(step_key)
        if nxt is not None:
            return nxt
        chain, pending = self._chain[state], self._pending[state]
        fill = sum(end - start for _, start, end in pending)
        added, pos = [], 0
        while pos < seg.length:
            take = min(self.block_size - fill, seg.length - pos)
            pending = pending + ((seg.key, pos, pos + take),)
            fill += take
            pos += take
            if fill == self.block_size:
                chain = self.block_id(chain, pending)
                added.append(chain)
                pending, fill = (), 0
        nxt = len(self._parent)
        self._parent.append(state)
        self._added.append(tuple(added))
        self._chain.append(chain)
        self._pending.append(pending)
        self._step[step_key] = nxt
        return nxt

    def extend(self, segments: Sequence[Segment], state: int = 0) -> int:
        """The walk state after `segments`, continuing from `state` (0: an empty prompt)."""
        for seg in segments:
            if seg.length > 0:
                state = self._advance(state, seg)
        return state

    def ids(self, state: int) -> list[int]:
        """The hash ids of the prompt a state stands for, the partial last block included."""
        pending = self._pending[state]
        tail = [self.block_id(self._chain[state], pending)] if pending else []
        parts = []
        while state:
            parts.append(self._added[state])
            state = self._parent[state]
        return [i for part in reversed(parts) for i in part] + tail

    def hash_ids(self, segments: Sequence[Segment]) -> list[int]:
        return self.ids(self.extend(segments))


def block_turns(
    rows: Sequence[tuple[int, int, float, Sequence[int]]],
    spawns: Mapping[int, Sequence[str]] | None = None,
) -> tuple[Turn, ...]:
    """Block-mode turns of an imported session from `(input, output, think_s, hash_ids)` rows
    (`hash_ids` a list, or `HashIds` already chained by the caller).

    `new_input_tokens` is what the prompt grew by beyond the previous prompt and its output
    (informative: block-mode content comes from the hash ids).
    """
    turns, prev, chain = [], None, IdChain()
    for k, (n_in, n_out, think, ids) in enumerate(rows):
        new_input = n_in if prev is None else max(0, n_in - prev[0] - prev[1])
        hashed = ids if isinstance(ids, HashIds) else chain.add(list(ids))
        turns.append(
            Turn(
                new_input_tokens=new_input,
                output_tokens=n_out,
                think_s=float(think),
                spawns=tuple((spawns or {}).get(k, ())),
                hash_ids=hashed,
                input_tokens=n_in,
            )
        )
        prev = (n_in, n_out)
    return tuple(turns)
