"""Weka / AgentX traces: the JSON the public agentic coding corpora (AgentX, kv-cache-tester) use.

One trace is `{id, block_size (64), hash_id_scope, tool_tokens, system_tokens, requests: [...]}`
where a request is an API call `{t, type, in, out, hash_ids, think_time, api_time, ...}` of type
`n` (non-streaming) or `s` (streaming) — `t` send time in seconds, `in`/`out` tokens, `hash_ids`
the prompt's 64-token blocks, `api_time` the call's duration, `think_time` the client's pause
before it (from the end of the last call with an `api_time`: `_gaps`) — or a subagent group
`{t, type: "subagent", requests: [...]}` holding that subagent's own calls. The corpora are
published as a directory of one-trace JSON files; a file may also hold one trace, a JSON list of
traces, or one trace per line (JSONL).

`hash_id_scope: "local"` (the default, as in the published corpora) makes ids private to their
trace — two traces' block 1 are different blocks — while its subagents share the trace's ids;
`"global"` shares ids across traces. Local ids are kept apart by adding `trace index << 40`
(`blocks.LOCAL_BITS`); the export masks them back.

Mapping: each trace is a main session of block-mode turns; each subagent group is a `spawn`-mode
child session. Consecutive groups after a request run in parallel: that request's turn lists them
in `spawns` and the parent's next request joins them. Unknown extra fields are ignored.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import orjson

from harness.errors import HarnessWarning, TraceFormatError
from harness.trace.blocks import LOCAL_BITS, IdChain, block_turns
from harness.trace.model import Session, Trace, TraceHeader

WEKA_BLOCK = 64
CALL_TYPES = ("n", "s")  # non-streaming and streaming API calls: both are requests here
GROUP_TYPE = "subagent"
SCOPES = ("local", "global")
_FIELDS = {"t": (int, float), "in": int, "out": int}


class _Ctx:
    def __init__(self, path: Path, line: int | None, offset: int) -> None:
        self.path, self.line, self.offset = path, line, offset  # offset: added to local ids
        self.block = WEKA_BLOCK
        self.shrunk: list[str] = []  # calls whose prompt is shorter than the previous call's

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
    if value < 0:
        raise ctx.fail(f"{where}{name}", f"must be >= 0, got {value}")
    return value


def _request(r: dict, ctx: _Ctx, where: str, chain: IdChain) -> tuple:
    """(t, in, out, think_time or None, HashIds, api_time or None) of one API call."""
    t, n_in, n_out = (_number(r, name, kinds, ctx, where) for name, kinds in _FIELDS.items())
    think = _optional(r, "think_time", ctx, where)
    api = _optional(r, "api_time", ctx, where)
    raw = r.get("hash_ids")
    if not isinstance(raw, list):
        raise ctx.fail(
            f"{where}hash_ids", "missing" if raw is None else f"wrong type {type(raw).__name__}"
        )
    if n_in < 1:
        raise ctx.fail(f"{where}in", "must be >= 1")
    _check_ids(raw, n_in, ctx, where)
    try:
        ids = chain.add(raw)
    except ValueError as exc:
        i = exc.args[0]
        integer = isinstance(raw[i], int) and not isinstance(raw[i], bool)
        reason = f"local ids must be in [0, 2^{LOCAL_BITS})" if integer else "must be an integer"
        raise ctx.fail(f"{where}hash_ids[{i}]", reason) from None
    return t, n_in, n_out, think, ids, api


def _check_ids(raw: list, n_in: int, ctx: _Ctx, where: str) -> None:
    """A block id names its whole prefix, so it appears once in a prompt, and a prompt of `in`
    tokens has at most ceil(in / block_size) blocks (the corpora hash the full ones)."""
    most = -(-n_in // ctx.block)
    if len(raw) > most:
        raise ctx.fail(
            f"{where}hash_ids",
            f"{len(raw)} blocks of {ctx.block} tokens, more than `in` = {n_in} tokens fill ({most})",
        )
    if len(set(raw)) < len(raw) and all(isinstance(h, int) for h in raw):
        first: dict[int, int] = {}
        for i, h in enumerate(raw):
            if h in first:
                raise ctx.fail(
                    f"{where}hash_ids[{i}]",
                    f"repeats hash_ids[{first[h]}] ({h}): a block id names its whole prefix",
                )
            first[h] = i


def _optional(r: dict, name: str, ctx: _Ctx, where: str) -> float | None:
    return None if r.get(name) is None else float(_number(r, name, (int, float), ctx, where))


def _gaps(calls: list[tuple]) -> list[float]:
    """Each call's pause after the previous call's end. In the recorded corpora `think_time`
    counts from the end of the last call that has an `api_time` (streamed calls often lack one;
    docs/traces.md), so where the previous call has none, or the call has no `think_time`, the
    gap comes from `t`: the send-time difference less the previous call's `api_time` if known.
    A session without any `api_time` (our own export) is taken at its `think_time`s."""
    timed = any(c[5] is not None for c in calls)
    gaps = []
    for k, (t, _, _, think, _, _) in enumerate(calls):
        prev = calls[k - 1] if k else None
        if think is not None and (prev is None or prev[5] is not None or not timed):
            gaps.append(think)
        else:
            gaps.append(0.0 if prev is None else max(0.0, t - prev[0] - (prev[5] or 0.0)))
    return gaps


class _Builder:
    def __init__(self, ctx: _Ctx, system_tokens: int, system_id: str) -> None:
        self.ctx, self.system_tokens, self.system_id = ctx, system_tokens, system_id
        self.sessions: list[Session] = []

    def session(self, sid: str, items, where: str, parent: str | None, fork: int | None) -> None:
        if not isinstance(items, list) or not items:
            raise self.ctx.fail(f"{where}requests", "must be a non-empty list")
        slot = len(self.sessions)  # parents before children, as in the native format
        self.sessions.append(None)  # type: ignore[arg-type]  # a placeholder: set at the end
        calls: list[tuple] = []
        spawns: dict[int, list[str]] = {}
        agents: dict[str, int] = {}
        chain = IdChain(self.ctx.offset if self.ctx.offset >= 0 else None)
        for i, item in enumerate(items):
            at = f"{where}requests[{i}]."
            if not isinstance(item, dict):
                raise self.ctx.fail(at.rstrip("."), "expected an object")
            kind = item.get("type", "n")
            if kind == GROUP_TYPE:
                if not calls:
                    raise self.ctx.fail(f"{at}type", "a subagent group needs a request before it")
                self._agent_id(item, agents, i, at)
                child_id = f"{sid}.a{sum(len(v) for v in spawns.values()) + 1}"
                self.session(child_id, item.get("requests"), at, sid, len(calls) - 1)
                spawns.setdefault(len(calls) - 1, []).append(child_id)
            elif kind in CALL_TYPES:
                calls.append(_request(item, self.ctx, at, chain))
                if len(calls) > 1 and calls[-1][1] < calls[-2][1]:
                    self.ctx.shrunk.append(f"{sid} {at}in: {calls[-1][1]:,} < {calls[-2][1]:,}")
            else:
                known = ", ".join(repr(k) for k in (*CALL_TYPES, GROUP_TYPE))
                raise self.ctx.fail(f"{at}type", f"unknown request type {kind!r} (one of {known})")
        if not calls:
            raise self.ctx.fail(f"{where}requests", "has no API calls (type 'n' or 's')")
        gaps = _gaps(calls)
        turns = block_turns(
            [(c[1], c[2], gap, c[4]) for c, gap in zip(calls, gaps, strict=True)], spawns
        )
        self.sessions[slot] = Session(
            id=sid,
            arrival_s=float(calls[0][0]),
            system_tokens=self.system_tokens,
            system_id=self.system_id,
            turns=turns,
            parent=parent,
            fork_turn=fork,
            mode=None if parent is None else "spawn",
        )

    def _agent_id(self, item: dict, seen: dict[str, int], i: int, at: str) -> None:
        """Subagent groups of one list name distinct agents (AIPerf's loader rejects repeats)."""
        agent = item.get("agent_id")
        if agent is None:
            return
        if agent in seen:
            raise self.ctx.fail(
                f"{at}agent_id", f"duplicate agent_id {agent!r} (also requests[{seen[agent]}])"
            )
        seen[agent] = i


def _trace_sessions(
    obj, path: Path, line: int | None, index: int, seen: set[str], shrunk: list[str]
) -> tuple[int, str, list[Session]]:
    """(block size, scope, sessions) of the `index`-th trace of a load; calls whose prompt is
    shorter than the previous one's are appended to `shrunk`."""
    ctx = _Ctx(path, line, -1)
    if not isinstance(obj, dict):
        raise ctx.fail(None, "expected a trace object")
    if "id" not in obj:
        raise ctx.fail("id", "missing")
    if not isinstance(obj["id"], str | int) or isinstance(obj["id"], bool):
        raise ctx.fail("id", f"wrong type {type(obj['id']).__name__}")
    block = _number(obj, "block_size", int, ctx, "", default=WEKA_BLOCK)
    if block < 1:
        raise ctx.fail("block_size", "must be positive")
    scope = obj.get("hash_id_scope", "local")
    if scope not in SCOPES:
        raise ctx.fail("hash_id_scope", f"must be 'local' or 'global', got {scope!r}")
    ctx.offset = index << LOCAL_BITS if scope == "local" else -1
    ctx.block = block
    system = _number(obj, "system_tokens", int, ctx, "", default=0)
    tools = _number(obj, "tool_tokens", int, ctx, "", default=0)
    sid = str(obj["id"])
    if sid in seen:
        raise ctx.fail("id", f"duplicate trace id {sid!r}")
    seen.add(sid)
    builder = _Builder(ctx, system + tools, f"weka-sys{system}-tools{tools}")
    builder.session(sid, obj.get("requests"), "", None, None)
    shrunk += ctx.shrunk
    return block, scope, builder.sessions


def _json_error(
    path: Path, data: bytes, exc: orjson.JSONDecodeError, skipped: int
) -> TraceFormatError:
    """`skipped`: blank lines before `data` began."""
    cut = " (the file ends there: truncated?)" if exc.pos >= len(data.rstrip()) else ""
    return TraceFormatError(
        f"invalid JSON at column {exc.colno}: {exc.msg}{cut}", path=path, line=exc.lineno + skipped
    )


def read_units(path: Path) -> Iterator[tuple[object, int | None]]:
    """(trace object, line number or None) of a JSON document, a JSON list or JSON Lines.

    JSON Lines (the first line is a whole trace) are read line by line, so a corpus in one file
    is never in memory at once. A document spread over lines (pretty-printed) that does not
    parse is reported where the parser stopped, not as a bad first line of JSON Lines."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise TraceFormatError(f"cannot open trace: {exc.strerror}", path=path) from exc
    with fh:
        head, lineno = b"", 0
        while not head.strip():
            head, lineno = fh.readline(), lineno + 1
            if not head:
                return
        try:
            first = orjson.loads(head)
        except orjson.JSONDecodeError:
            first = None
        if isinstance(first, dict):
            yield first, lineno
            yield from _lines(path, fh, lineno + 1)
            return
        data = head + fh.read()
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _json_error(path, data, exc, lineno - 1) from exc
    if isinstance(whole, list):
        yield from ((o, None) for o in whole)
    else:
        yield whole, None


def _lines(path: Path, fh, start: int) -> Iterator[tuple[object, int]]:
    for lineno, raw in enumerate(fh, start=start):
        if raw.strip():
            try:
                yield orjson.loads(raw), lineno
            except orjson.JSONDecodeError as exc:
                raise TraceFormatError(f"invalid JSON ({exc})", path=path, line=lineno) from exc


def _warn_shrunk(path: Path, shrunk: list[str]) -> None:
    """Real corpora do it (Claude Code compacts its context: 422 of 49,334 calls in the public
    kv-cache-tester corpus), so it is counted, not refused."""
    warnings.warn(
        f"{path}: {len(shrunk):,} calls have a shorter prompt than their session's previous call "
        f"(a compacted context; first: {shrunk[0]}); each is sent as recorded",
        HarnessWarning,
        stacklevel=3,
    )


def trace_files(path: Path) -> list[Path]:
    """A file, or the `*.json` / `*.jsonl` files of a directory (a published corpus) by name."""
    if not path.is_dir():
        return [path]
    files = sorted(
        p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and not p.name.startswith(".")
    )
    if not files:
        raise TraceFormatError("directory holds no .json or .jsonl trace files", path=path)
    return files


def read_weka(path: str | Path) -> Trace:
    path = Path(path)
    sessions: list[Session] = []
    blocks: set[int] = set()
    scopes: set[str] = set()
    seen: set[str] = set()
    shrunk: list[str] = []
    for file in trace_files(path):
        for obj, line in read_units(file):
            block, scope, got = _trace_sessions(obj, file, line, len(seen), seen, shrunk)
            blocks.add(block)
            scopes.add(scope)
            sessions += got
    if not sessions:
        raise TraceFormatError("no traces in file", path=path)
    if len(blocks) > 1:
        raise TraceFormatError(
            f"traces disagree on block_size: {sorted(blocks)}", path=path, field="block_size"
        )
    scope = scopes.pop() if len(scopes) == 1 else "mixed"
    if shrunk:
        _warn_shrunk(path, shrunk)
    meta = {"source": path.name, "source_format": "weka", "hash_id_scope": scope}
    return Trace(TraceHeader(profile="weka", block_size=blocks.pop(), meta=meta), tuple(sessions))
