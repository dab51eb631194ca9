"""Mooncake JSONL: one request per line, `{timestamp, input_length, output_length, hash_ids}`.

`timestamp` is the send time in milliseconds; `hash_ids` are prefix hashes of the prompt's blocks
(512 tokens by default, the last one possibly partial), so two requests with equal leading ids
share that prefix. Imported requests become block-mode turns (`Turn.hash_ids`), which keeps the
block-level sharing exact. Export computes the ids from our materialized content instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import orjson

from harness.errors import TraceFormatError
from harness.trace.blocks import BlockHasher, block_turns
from harness.trace.blockwalk import BlockPaths, Families
from harness.trace.content import SALT_TOKENS, Content
from harness.trace.model import Session, Trace, TraceHeader, Turn
from harness.trace.native import iter_json_lines, write_lines
from harness.trace.timeline import send_order

MOONCAKE_BLOCK = 512
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "timestamp": (int, float),
    "input_length": int,
    "output_length": int,
    "hash_ids": list,
}


def _check_request(obj, path: Path, line: int, block_size: int) -> None:
    if not isinstance(obj, dict):
        raise TraceFormatError(
            "expected a JSON object (one request per line)", path=path, line=line
        )
    for name, kind in _FIELDS.items():
        if name not in obj:
            raise TraceFormatError("missing", path=path, line=line, field=name)
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise TraceFormatError(
                f"wrong type {type(value).__name__}", path=path, line=line, field=name
            )
        if isinstance(value, int | float) and value < 0:  # the numbers (not hash_ids)
            raise TraceFormatError(f"must be >= 0, got {value}", path=path, line=line, field=name)
    for i, h in enumerate(obj["hash_ids"]):
        if isinstance(h, bool) or not isinstance(h, int):
            raise TraceFormatError(
                "must be an integer", path=path, line=line, field=f"hash_ids[{i}]"
            )
    if obj["input_length"] < 1:
        raise TraceFormatError("must be >= 1", path=path, line=line, field="input_length")
    _check_blocks(obj["hash_ids"], obj["input_length"], path, line, block_size)


def _check_blocks(ids: list[int], n_in: int, path: Path, line: int, block_size: int) -> None:
    """A prefix hash names its whole prefix, so it appears once in a request; `input_length`
    tokens fill at most ceil(input_length / block) blocks (the public traces: exactly that)."""
    most = -(-n_in // block_size)
    if len(ids) > most:
        raise TraceFormatError(
            f"{len(ids)} blocks, more than input_length {n_in} fills in {block_size}-token blocks "
            f"({most}); is --mooncake-block-size right?",
            path=path,
            line=line,
            field="hash_ids",
        )
    first: dict[int, int] = {}
    for i, h in enumerate(ids):
        if h in first:
            raise TraceFormatError(
                f"repeats hash_ids[{first[h]}] ({h}): a block id names its whole prefix",
                path=path,
                line=line,
                field=f"hash_ids[{i}]",
            )
        first[h] = i


def _iter_requests(path: Path, block_size: int) -> Iterator[tuple[int, dict]]:
    for lineno, obj in iter_json_lines(path):
        _check_request(obj, path, lineno, block_size)
        yield lineno, obj


class _Grouper:
    """Groups requests into sessions by prefix chains.

    Hash ids are prefix hashes, so the id at block i names the whole prefix up to block i. A
    request continues the most recent session whose last prompt's full blocks are a prefix of
    it (and which is shorter); the last block of a prompt is usually partial, so it is not
    required to match.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.tails: dict[
            tuple[int, int], int
        ] = {}  # (full blocks, id at last full block) -> session

    def _full_blocks(self, req: dict) -> int:
        return min(len(req["hash_ids"]), req["input_length"] // self.block_size)

    def find(self, req: dict, sessions: list[list[dict]]) -> int | None:
        ids = req["hash_ids"]
        for i in range(len(ids) - 1, -1, -1):
            sid = self.tails.get((i + 1, ids[i]))
            if sid is not None and sessions[sid][-1]["input_length"] < req["input_length"]:
                return sid
        return None

    def add(self, req: dict, sid: int, sessions: list[list[dict]]) -> None:
        if sessions[sid]:
            self._forget(sessions[sid][-1], sid)
        sessions[sid].append(req)
        n = self._full_blocks(req)
        if n:
            self.tails[(n, req["hash_ids"][n - 1])] = sid

    def _forget(self, req: dict, sid: int) -> None:
        n = self._full_blocks(req)
        key = (n, req["hash_ids"][n - 1]) if n else None
        if key is not None and self.tails.get(key) == sid:
            del self.tails[key]


def _turns(reqs: list[dict]) -> tuple[Turn, ...]:
    """Think time is the gap between sends (so it includes the previous request's service)."""
    thinks = [0.0] + [max(0.0, b["t"] - a["t"]) for a, b in itertools.pairwise(reqs)]
    rows = [
        (r["input_length"], r["output_length"], th, r["hash_ids"])
        for r, th in zip(reqs, thinks, strict=True)
    ]
    return block_turns(rows)


def read_mooncake(
    path: str | Path, *, block_size: int = MOONCAKE_BLOCK, group_sessions: bool = False
) -> Trace:
    path = Path(path)
    if block_size <= 0:
        raise TraceFormatError(f"block size must be positive, got {block_size}", path=path)
    sessions: list[list[dict]] = []
    grouper = _Grouper(block_size)
    for _, req in _iter_requests(path, block_size):
        req["t"] = req["timestamp"] / 1000.0
        sid = grouper.find(req, sessions) if group_sessions else None
        if sid is None:
            sessions.append([])
            sid = len(sessions) - 1
        grouper.add(req, sid, sessions)
    if not sessions:
        raise TraceFormatError("no requests in file", path=path)
    out = tuple(
        Session(
            id=f"r{i:06d}",
            arrival_s=reqs[0]["t"],
            system_tokens=0,
            system_id="none",
            turns=_turns(reqs),
        )
        for i, reqs in enumerate(sessions)
    )
    meta = {"source": path.name, "source_format": "mooncake", "grouped": group_sessions}
    return Trace(TraceHeader(profile="mooncake", block_size=block_size, meta=meta), out)


class _BlockRecut:
    """Mooncake ids of block-mode prompts cut again at another block size, incrementally.

    A block id names the prompt's content up to the block's end. Content up to a point inside an
    imported prompt is named exactly by the trie node of the source block holding that point and
    the tokens of that block included (`BlockPaths` gives the nodes; the salt, if any, is the
    same in front of every prompt), so ids are interned by `(node, tokens)` in first-seen order
    through the same `BlockHasher` counter: the ids equal hashing the block segments from the
    start of every prompt (a test checks it). A prompt reuses the ids of the blocks it shares
    with the prompt it was walked from and only computes the rest."""

    def __init__(
        self, hasher: BlockHasher, source_block: int, salt_tokens: int, private: bool
    ) -> None:
        self.hasher, self.salt = hasher, salt_tokens
        self.paths = BlockPaths(source_block, private=private)
        self._full: dict[str, list[int]] = {}  # session -> full-block ids of its last prompt
        self._keys: dict[str, list[tuple]] | None = {} if private else None  # family -> its ids

    def finish(self, family: str) -> None:
        """A private family (local-scope ids) sent its last request: forget its blocks."""
        self.paths.finish(family)
        if self._keys is not None:
            self.hasher.forget(self._keys.pop(family, ()))

    def ids(
        self, sid: str, turn: Turn, parent: str | None, last: bool, family: str
    ) -> tuple[int, list[int]]:
        p = self.paths.walk(sid, turn, parent=parent, last=last, family=family)
        keys = self._keys.setdefault(family, []) if self._keys is not None else None
        big, salt = self.hasher.block_size, self.salt
        ref_full = self._full.get(p.ref, []) if p.ref is not None else []
        # Blocks before either prompt's last are whole in both: their content is the same.
        same = salt + max(0, min(p.shared, p.ref_blocks - 1, p.blocks - 1)) * self.paths.block_size
        keep = min(same // big, len(ref_full))
        total = salt + p.total
        ends = np.arange((keep + 1) * big, total + 1, big)
        if total % big:
            ends = np.append(ends, total)
        cum = np.cumsum(p.lengths)
        at = np.searchsorted(cum, ends - salt)
        full = ref_full[:keep]
        for end, i in zip(ends.tolist(), at.tolist(), strict=True):
            q = end - salt
            key = (-1, end) if q <= 0 else (int(p.nodes[i]), q - int(cum[i] - p.lengths[i]))
            full.append(self.hasher.block_id(-2, key))
            if keys is not None and q > 0:
                keys.append(key)
        out = list(full)
        if total % big:
            full.pop()  # the open last block is no prefix a later prompt can reuse
        if last:
            self._full.pop(sid, None)
        else:
            self._full[sid] = full
        return total, out


def mooncake_lines(
    trace: Trace,
    *,
    block_size: int = MOONCAKE_BLOCK,
    salt: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """One Mooncake request per trace request, in estimated send order."""
    content = Content(trace, salt=salt, cache_size=64)
    hasher = BlockHasher(block_size)
    private = trace.header.meta.get("hash_id_scope") == "local"
    recut = _BlockRecut(hasher, trace.header.block_size, SALT_TOKENS if salt else 0, private)
    families = Families(trace)
    ends: dict[str, tuple[int, int]] = {}  # session -> (walk state, length) after its last prompt
    for n, (t, sid, k) in enumerate(send_order(trace), start=1):
        session = trace.session(sid)
        turn, last = session.turns[k], k == len(session.turns) - 1
        if turn.hash_ids is not None:
            length, ids = recut.ids(sid, turn, session.parent, last, families.root[sid])
            if families.sent(sid):
                recut.finish(families.root[sid])
        else:
            extends = content.appends_to_previous(sid, k)
            segs = content.new_segments(sid, k) if extends else content.segments(sid, k)
            state, length = ends[sid] if extends else (0, 0)
            state = hasher.extend(segs, state)
            length += sum(s.length for s in segs)
            ends[sid] = (state, length)
            ids = hasher.ids(state)
            if last:
                ends.pop(sid, None)
        obj = {"timestamp": int(round(t * 1000)), "input_length": length, "output_length": turn.output_tokens,
               "hash_ids": ids}  # fmt: skip
        if progress is not None:
            progress(n)
        yield orjson.dumps(obj).decode()


def write_mooncake(
    trace: Trace,
    path: str | Path,
    block_size: int = MOONCAKE_BLOCK,
    salt: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> None:
    if block_size <= 0:
        raise TraceFormatError(f"block size must be positive, got {block_size}", path=path)
    write_lines(mooncake_lines(trace, block_size=block_size, salt=salt, progress=progress), path)
