"""Mooncake JSONL: one request per line, `{timestamp, input_length, output_length, hash_ids}`.

`timestamp` is the send time in milliseconds; `hash_ids` are prefix hashes of the prompt's blocks
(512 tokens by default, the last one possibly partial), so two requests with equal leading ids
share that prefix. Imported requests become block-mode turns (`Turn.hash_ids`), which keeps the
block-level sharing exact. Export computes the ids from our materialized content instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import orjson

from harness.errors import TraceFormatError
from harness.trace.blocks import BlockHasher, block_turns
from harness.trace.content import Content
from harness.trace.model import Session, Trace, TraceHeader, Turn
from harness.trace.native import iter_json_lines, write_lines
from harness.trace.timeline import prompt_steps

MOONCAKE_BLOCK = 512
_FIELDS = {"timestamp": (int, float), "input_length": int, "output_length": int, "hash_ids": list}


def _check_request(obj, path: Path, line: int) -> None:
    if not isinstance(obj, dict):
        raise TraceFormatError("expected a JSON object (one request per line)", path=path, line=line)
    for name, kind in _FIELDS.items():
        if name not in obj:
            raise TraceFormatError("missing", path=path, line=line, field=name)
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise TraceFormatError(f"wrong type {type(value).__name__}", path=path, line=line, field=name)
        if name != "hash_ids" and value < 0:
            raise TraceFormatError(f"must be >= 0, got {value}", path=path, line=line, field=name)
    for i, h in enumerate(obj["hash_ids"]):
        if isinstance(h, bool) or not isinstance(h, int):
            raise TraceFormatError("must be an integer", path=path, line=line, field=f"hash_ids[{i}]")
    if obj["input_length"] < 1:
        raise TraceFormatError("must be >= 1", path=path, line=line, field="input_length")


def _iter_requests(path: Path) -> Iterator[tuple[int, dict]]:
    for lineno, obj in iter_json_lines(path):
        _check_request(obj, path, lineno)
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
        self.tails: dict[tuple[int, int], int] = {}  # (full blocks, id at last full block) -> session

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
    rows = [(r["input_length"], r["output_length"], th, r["hash_ids"]) for r, th in zip(reqs, thinks, strict=True)]
    return block_turns(rows)


def read_mooncake(path: str | Path, *, block_size: int = MOONCAKE_BLOCK, group_sessions: bool = False) -> Trace:
    path = Path(path)
    if block_size <= 0:
        raise TraceFormatError(f"block size must be positive, got {block_size}", path=path)
    sessions: list[list[dict]] = []
    grouper = _Grouper(block_size)
    for _, req in _iter_requests(path):
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


def mooncake_lines(trace: Trace, *, block_size: int = MOONCAKE_BLOCK, salt: str | None = None) -> Iterator[str]:
    """One Mooncake request per trace request, in estimated send order."""
    content = Content(trace, salt=salt, cache_size=64)
    hasher = BlockHasher(block_size)
    ends: dict[str, tuple[int, int]] = {}  # session -> (walk state, length) after its last prompt
    for t, sid, k, extends, segs in prompt_steps(trace, content):
        state, length = ends[sid] if extends else (0, 0)
        state = hasher.extend(segs, state)
        length += sum(s.length for s in segs)
        ends[sid] = (state, length)
        ids = hasher.ids(state)
        obj = {
            "timestamp": int(round(t * 1000)),
            "input_length": length,
            "output_length": trace.session(sid).turns[k].output_tokens,
            "hash_ids": ids,
        }
        yield orjson.dumps(obj).decode()


def write_mooncake(trace: Trace, path: str | Path, block_size: int = MOONCAKE_BLOCK, salt: str | None = None) -> None:
    if block_size <= 0:
        raise TraceFormatError(f"block size must be positive, got {block_size}", path=path)
    write_lines(mooncake_lines(trace, block_size=block_size, salt=salt), path)
