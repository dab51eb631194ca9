"""The prefixes an endpoint is known to have computed, and how much of them a server rule keeps.

`analysis.cache` calls a missed token *evicted* only where an earlier request on the same endpoint
had finished computing it (docs/metrics.md, "Where missed tokens went"). The walk
(`analysis.ideal.walk`) enters a request's prompt into its endpoint's `HeldPrefixes` once its
prefill finished, with `keep`: the tokens of it a server keeps. A server that never keeps the last
block of a prompt of a whole number of blocks (vLLM's CPU build, measured) keeps `prompt − block`
of such a prompt. A later prompt then shares two lengths with the endpoint: `held` (with any
computed prompt) and `kept` (with the kept parts): the tokens between them are the ones that rule
explains.

A trie over segment keys, as `trace.prefix.IdealPrefixCache`, whose entries also hold `kept_to`:
the largest `min(keep, end of the entry)` over the prompts through it (token positions from the
prompt's start). An entry is fully kept when `kept_to` reaches its end; a fully kept entry's
ancestors are fully kept, so the kept positions along any path are a prefix of it, and a walk that
resumes where a session's previous prompt ended can find where that prefix stops by walking up
from there over the entries that are not fully kept (the last block of one prompt: a few).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.trace.content import Segment

_NODE, _LENGTH, _KEPT_TO, _START = range(4)


class HeldPrefixes:
    def __init__(self) -> None:
        # (parent node, segment key) -> [node, longest length seen, kept_to, start position]
        self._nodes: dict[tuple[int, tuple], list[int]] = {}
        self._entry: dict[int, tuple[int, list[int]]] = {}  # node -> (parent node, its entry)

    def shared(self, segments: Sequence[Segment], node: int = 0, base: int = 0) -> tuple[int, int]:
        """(tokens shared with a held prompt, of them kept), walking `segments` on from `node`,
        where a prompt of `base` tokens that this trie holds ended (`insert`'s return)."""
        pos, kept = base, self._kept_through(node, base)
        contiguous = kept == base
        for seg in segments:
            entry = self._nodes.get((node, seg.key))
            if entry is None:
                break
            n = min(entry[_LENGTH], seg.length)
            if contiguous:
                kept = max(pos, min(pos + n, entry[_KEPT_TO]))
                contiguous = kept == pos + n
            pos += n
            if entry[_LENGTH] != seg.length:
                break
            node = entry[_NODE]
        return pos, kept

    def insert(self, segments: Sequence[Segment], node: int, base: int, keep: int) -> int:
        """Hold a prompt: `segments` after `node`/`base` (a held prompt of this session), of which
        the first `keep` tokens (from the prompt's start) are kept. Returns the node it ends at."""
        self._raise(node, keep)
        pos = base
        for seg in segments:
            entry = self._nodes.get((node, seg.key))
            if entry is None:
                entry = self._nodes[(node, seg.key)] = [len(self._nodes) + 1, seg.length, 0, pos]
                self._entry[entry[_NODE]] = (node, entry)
            elif seg.length > entry[_LENGTH]:
                entry[_LENGTH] = seg.length
            pos += seg.length
            entry[_KEPT_TO] = max(entry[_KEPT_TO], min(keep, pos))
            node = entry[_NODE]
        return node

    def _raise(self, node: int, keep: int) -> None:
        """The path to `node` is part of the prompt being held: keep it up to `keep`."""
        while node:
            parent, entry = self._entry[node]
            want = min(keep, entry[_START] + entry[_LENGTH])
            if entry[_KEPT_TO] >= want:
                return  # its ancestors keep at least as much (the module docstring)
            entry[_KEPT_TO] = want
            node = parent

    def _kept_through(self, node: int, base: int) -> int:
        """Tokens kept along the path to `node`, of the first `base`."""
        if not node:
            return base
        parent, entry = self._entry[node]
        if entry[_KEPT_TO] >= base:
            return base
        end = base
        while parent:
            above, up = self._entry[parent]
            if up[_KEPT_TO] >= up[_START] + up[_LENGTH]:
                break
            parent, entry, end = above, up, up[_START] + up[_LENGTH]
        return max(entry[_START], min(entry[_KEPT_TO], end))
