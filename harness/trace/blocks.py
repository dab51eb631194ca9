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

from collections.abc import Mapping, Sequence

from harness.trace.content import Segment
from harness.trace.model import Turn


class BlockHasher:
    def __init__(self, block_size: int) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.block_size = block_size
        self._ids: dict[tuple, int] = {}  # (previous block id, pieces) -> block id
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
            got = self._ids[key] = len(self._ids)
        return got

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
    """Block-mode turns of an imported session from `(input, output, think_s, hash_ids)` rows.

    `new_input_tokens` is what the prompt grew by beyond the previous prompt and its output
    (informative: block-mode content comes from the hash ids).
    """
    turns, prev = [], None
    for k, (n_in, n_out, think, ids) in enumerate(rows):
        new_input = n_in if prev is None else max(0, n_in - prev[0] - prev[1])
        turns.append(
            Turn(
                new_input_tokens=new_input,
                output_tokens=n_out,
                think_s=float(think),
                spawns=tuple((spawns or {}).get(k, ())),
                hash_ids=tuple(ids),
                input_tokens=n_in,
            )
        )
        prev = (n_in, n_out)
    return tuple(turns)
