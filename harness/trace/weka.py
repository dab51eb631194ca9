"""Weka / AgentX traces: the JSON SemiAnalysis publishes its AgentX corpus in.

One trace is `{id, block_size (64), tool_tokens, system_tokens, requests: [...]}` where a request
is `{t, type: "n", in, out, hash_ids, think_time, ...}` (`t` send time in seconds, `in`/`out`
tokens, `hash_ids` prefix-hashed blocks of the prompt, `think_time` the pause before it) or a
subagent group `{t, type: "subagent", requests: [...]}` holding that subagent's own requests.
A file holds one trace (JSON), a JSON list of traces, or one trace per line (JSONL).

Mapping: each trace is a main session of block-mode turns; each subagent group is a `spawn`-mode
child session (its prompts carry their own hash ids, so what it shares with the parent stays
visible at block level). Consecutive groups after a request run in parallel: that request's turn
lists them in `spawns` and the parent's next request joins them. Unknown extra fields are kept out.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from harness.errors import TraceFormatError
from harness.trace.blocks import block_turns
from harness.trace.model import Session, Trace, TraceHeader

WEKA_BLOCK = 64
_REQUEST_FIELDS = {"t": (int, float), "in": int, "out": int, "hash_ids": list}


class _Ctx:
    def __init__(self, path: Path, line: int | None) -> None:
        self.path, self.line = path, line

    def fail(self, field: str | None, message: str) -> TraceFormatError:
        return TraceFormatError(message, path=self.path, line=self.line, field=field)


def _number(obj: dict, name: str, kinds, ctx: _Ctx, where: str, default=None):
    if name not in obj:
        if default is not None:
            return default
        raise ctx.fail(f"{where}{name}", "missing")
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ctx.fail(f"{where}{name}", f"wrong type {type(value).__name__}")
    if isinstance(value, int | float) and value < 0:
        raise ctx.fail(f"{where}{name}", f"must be >= 0, got {value}")
    return value


def _request(r, ctx: _Ctx, where: str) -> dict:
    if not isinstance(r, dict):
        raise ctx.fail(where.rstrip("."), "expected an object")
    out = {name: _number(r, name, kinds, ctx, where) for name, kinds in _REQUEST_FIELDS.items()}
    out["think_time"] = float(_number(r, "think_time", (int, float), ctx, where, default=0.0))
    for i, h in enumerate(out["hash_ids"]):
        if isinstance(h, bool) or not isinstance(h, int):
            raise ctx.fail(f"{where}hash_ids[{i}]", "must be an integer")
    if out["in"] < 1:
        raise ctx.fail(f"{where}in", "must be >= 1")
    return out


class _Builder:
    def __init__(self, ctx: _Ctx, system_tokens: int, system_id: str) -> None:
        self.ctx, self.system_tokens, self.system_id = ctx, system_tokens, system_id
        self.sessions: list[Session] = []

    def session(self, sid: str, items: list, where: str, parent: str | None, fork: int | None) -> Session:
        if not isinstance(items, list) or not items:
            raise self.ctx.fail(f"{where}requests", "must be a non-empty list")
        slot = len(self.sessions)  # parents before children, as in the native format
        self.sessions.append(None)  # type: ignore[arg-type]
        reqs: list[dict] = []
        spawns: dict[int, list[str]] = {}
        n_sub = 0
        for i, item in enumerate(items):
            at = f"{where}requests[{i}]."
            kind = item.get("type", "n") if isinstance(item, dict) else None
            if kind == "subagent":
                if not reqs:
                    raise self.ctx.fail(f"{at}type", "a subagent group needs a request before it")
                n_sub += 1
                child_id = f"{sid}.a{n_sub}"
                self.session(child_id, item.get("requests"), at, sid, len(reqs) - 1)
                spawns.setdefault(len(reqs) - 1, []).append(child_id)
            elif kind == "n":
                reqs.append(_request(item, self.ctx, at))
            else:
                raise self.ctx.fail(f"{at}type", f"must be 'n' or 'subagent', got {kind!r}")
        if not reqs:
            raise self.ctx.fail(f"{where}requests", "has no requests of type 'n'")
        turns = block_turns([(r["in"], r["out"], r["think_time"], r["hash_ids"]) for r in reqs], spawns)
        s = Session(
            id=sid,
            arrival_s=float(reqs[0]["t"]),
            system_tokens=self.system_tokens,
            system_id=self.system_id,
            turns=turns,
            parent=parent,
            fork_turn=fork,
            mode=None if parent is None else "spawn",
        )
        self.sessions[slot] = s
        return s


def _trace_sessions(obj, ctx: _Ctx, seen: set[str]) -> tuple[int, list[Session]]:
    if not isinstance(obj, dict):
        raise ctx.fail(None, "expected a trace object")
    if "id" not in obj:
        raise ctx.fail("id", "missing")
    if not isinstance(obj["id"], str | int) or isinstance(obj["id"], bool):
        raise ctx.fail("id", f"wrong type {type(obj['id']).__name__}")
    block = _number(obj, "block_size", int, ctx, "", default=WEKA_BLOCK)
    if block < 1:
        raise ctx.fail("block_size", "must be positive")
    system = _number(obj, "system_tokens", int, ctx, "", default=0)
    tools = _number(obj, "tool_tokens", int, ctx, "", default=0)
    sid = str(obj["id"])
    if sid in seen:
        raise ctx.fail("id", f"duplicate trace id {sid!r}")
    seen.add(sid)
    builder = _Builder(ctx, system + tools, f"weka-sys{system}-tools{tools}")
    builder.session(sid, obj.get("requests"), "", None, None)
    return block, builder.sessions


def _parse_units(path: Path, data: bytes) -> list[tuple[object, int | None]]:
    """(trace object, line number or None) for a JSON file, a JSON list or JSONL."""
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        whole = None
    if isinstance(whole, list):
        return [(o, None) for o in whole]
    if whole is not None:
        return [(whole, None)]
    units = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if raw.strip():
            try:
                units.append((orjson.loads(raw), lineno))
            except orjson.JSONDecodeError as exc:
                raise TraceFormatError(f"invalid JSON ({exc})", path=path, line=lineno) from exc
    return units


def read_weka(path: str | Path) -> Trace:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"cannot open trace: {exc.strerror}", path=path) from exc
    sessions: list[Session] = []
    blocks: set[int] = set()
    seen: set[str] = set()
    for obj, line in _parse_units(path, data):
        block, got = _trace_sessions(obj, _Ctx(path, line), seen)
        blocks.add(block)
        sessions += got
    if not sessions:
        raise TraceFormatError("no traces in file", path=path)
    if len(blocks) > 1:
        raise TraceFormatError(f"traces disagree on block_size: {sorted(blocks)}", path=path, field="block_size")
    meta = {"source": path.name, "source_format": "weka"}
    return Trace(TraceHeader(profile="weka", block_size=blocks.pop(), meta=meta), tuple(sessions))
