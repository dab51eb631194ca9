"""The native trace file: JSON Lines, a versioned header line, then one session per line.

Turns are stored column-wise inside each session line (one list per turn field), which keeps a
10,000-session trace compact and still readable. Writing is deterministic (the same trace gives
the same bytes) and reading back gives an equal `Trace`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic_core import ErrorDetails

from harness.atomic import replacing
from harness.errors import TraceFormatError
from harness.trace.blocks import IdChain
from harness.trace.model import TRACE_FORMAT, TRACE_VERSION, Session, Trace, TraceHeader, Turn
from harness.trace.recorded import RecordedFormatError, prompts_from, prompts_obj

_NonNegInt = int
_V = TypeVar("_V")


class _HeaderModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    format: str
    version: int
    seed: int | None = None
    profile: str | None = None
    block_size: int = 16
    meta: dict = {}

    @field_validator("block_size")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be a positive integer")
        return v


class _TurnsModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    new_input_tokens: list[int]
    output_tokens: list[int]
    think_s: list[float | int]
    spawns: dict[str, list[str]] = {}  # turn index (as str) -> child session ids
    hash_ids: dict[str, list[int]] = {}  # turn index (as str) -> block hash ids
    input_tokens: dict[str, int] = {}  # turn index (as str) -> whole prompt length
    prompts: dict[str, dict] = {}  # turn index (as str) -> recorded prompt (a delta)


class _SessionModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    id: str
    arrival_s: float | int
    system_tokens: int
    system_id: str
    parent: str | None = None
    fork_turn: int | None = None
    mode: str | None = None
    turns: _TurnsModel


def _fail(path: Path, line: int, field: str | None, message: str) -> TraceFormatError:
    return TraceFormatError(message, path=path, line=line, field=field)


def _loc(err: ErrorDetails) -> str:
    return ".".join(str(p) for p in err["loc"])


def _by_turn(values: dict[str, _V], name: str, n: int, path: Path, line: int) -> dict[int, _V]:
    """A sparse turn field keyed by turn index (JSON object keys are strings)."""
    out: dict[int, _V] = {}
    for key, value in values.items():
        if not key.isdigit() or int(key) >= n:
            raise _fail(path, line, f"turns.{name}.{key}", f"is not a turn index below {n}")
        out[int(key)] = value
    return out


def _session_from_model(m: _SessionModel, path: Path, line: int) -> Session:
    t = m.turns
    n = len(t.new_input_tokens)
    for name in ("output_tokens", "think_s"):
        if len(getattr(t, name)) != n:
            raise _fail(
                path, line, f"turns.{name}", f"has {len(getattr(t, name))} entries, expected {n}"
            )
    if n == 0:
        raise _fail(path, line, "turns", "a session needs at least one turn")
    for name in ("new_input_tokens", "output_tokens"):
        for i, v in enumerate(getattr(t, name)):
            if v < 0:
                raise _fail(path, line, f"turns.{name}[{i}]", f"must be >= 0, got {v}")
    for i, v in enumerate(t.think_s):
        if not math.isfinite(v) or v < 0:
            raise _fail(path, line, f"turns.think_s[{i}]", f"must be a finite number >= 0, got {v}")
    spawns = _by_turn(t.spawns, "spawns", n, path, line)
    hash_ids = _by_turn(t.hash_ids, "hash_ids", n, path, line)
    input_tokens = _by_turn(t.input_tokens, "input_tokens", n, path, line)
    if set(hash_ids) != set(input_tokens):
        raise _fail(
            path, line, "turns.input_tokens", "must name exactly the turns that have hash_ids"
        )
    try:
        prompts = prompts_from(t.prompts, n)
    except RecordedFormatError as exc:
        raise _fail(path, line, f"turns.prompts.{exc.field}", str(exc)) from None
    chain = IdChain()  # consecutive prompts share their leading ids: store each once
    hashed = {i: chain.add(hash_ids[i]) for i in sorted(hash_ids)}
    turns = tuple(
        Turn(
            new_input_tokens=t.new_input_tokens[i],
            output_tokens=t.output_tokens[i],
            think_s=float(t.think_s[i]),
            spawns=tuple(spawns.get(i, ())),
            hash_ids=hashed.get(i),
            input_tokens=input_tokens.get(i),
            prompt=prompts.get(i),
        )
        for i in range(n)
    )
    if m.mode not in (None, "fork", "spawn"):
        raise _fail(path, line, "mode", f"must be 'fork', 'spawn' or null, got {m.mode!r}")
    if (m.parent is None) != (m.mode is None):
        raise _fail(path, line, "mode", "is set exactly when 'parent' is set")
    if m.mode == "fork" and m.fork_turn is None:
        raise _fail(path, line, "fork_turn", "a fork subagent needs the parent turn it forks at")
    if not math.isfinite(m.arrival_s) or m.arrival_s < 0:
        raise _fail(path, line, "arrival_s", f"must be a finite number >= 0, got {m.arrival_s}")
    if m.system_tokens < 0:
        raise _fail(path, line, "system_tokens", f"must be >= 0, got {m.system_tokens}")
    return Session(
        id=m.id,
        arrival_s=float(m.arrival_s),
        system_tokens=m.system_tokens,
        system_id=m.system_id,
        turns=turns,
        parent=m.parent,
        fork_turn=m.fork_turn,
        mode=m.mode,  # type: ignore[arg-type]  # a str, checked above to be a Mode or None
    )


def _check_links(sessions: list[Session], lines: dict[str, int], path: Path) -> None:
    by_id = {s.id: s for s in sessions}
    for s in sessions:
        line = lines[s.id]
        if s.parent is not None:
            parent = by_id.get(s.parent)
            if parent is None:
                raise _fail(path, line, "parent", f"names unknown session {s.parent!r}")
            if s.fork_turn is not None and not 0 <= s.fork_turn < len(parent.turns):
                raise _fail(path, line, "fork_turn", f"{s.fork_turn} is not a turn of {s.parent!r}")
        for i, turn in enumerate(s.turns):
            for child in turn.spawns:
                c = by_id.get(child)
                if c is None or c.parent != s.id:
                    raise _fail(
                        path, line, f"turns.spawns.{i}", f"{child!r} is not a subagent of {s.id!r}"
                    )


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for each non-blank line of a JSON Lines file."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise TraceFormatError(f"cannot open trace: {exc.strerror}", path=path) from exc
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield lineno, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise _fail(path, lineno, None, f"invalid JSON ({exc})") from exc


def read_trace(path: str | Path) -> Trace:
    path = Path(path)
    header: TraceHeader | None = None
    sessions: list[Session] = []
    lines: dict[str, int] = {}
    for lineno, obj in iter_json_lines(path):
        if header is None:
            header = _parse_header(obj, path, lineno)
            continue
        session = _parse_session(obj, path, lineno)
        if session.id in lines:
            raise _fail(path, lineno, "id", f"duplicate session id {session.id!r}")
        lines[session.id] = lineno
        sessions.append(session)
    if header is None:
        raise TraceFormatError("empty file, expected a header line", path=path)
    _check_links(sessions, lines, path)
    return Trace(header=header, sessions=tuple(sessions))


def _parse_header(obj: Any, path: Path, lineno: int) -> TraceHeader:
    if not isinstance(obj, dict) or obj.get("format") != TRACE_FORMAT:
        raise _fail(
            path, lineno, "format", f"first line must be a header with format {TRACE_FORMAT!r}"
        )
    if obj.get("version") != TRACE_VERSION:
        raise _fail(
            path,
            lineno,
            "version",
            f"unsupported version {obj.get('version')!r} (this harness reads {TRACE_VERSION})",
        )
    try:
        h = _HeaderModel.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _fail(path, lineno, _loc(err), err["msg"]) from None
    return TraceHeader(seed=h.seed, profile=h.profile, block_size=h.block_size, meta=h.meta)


def _parse_session(obj: Any, path: Path, lineno: int) -> Session:
    if not isinstance(obj, dict):
        raise _fail(path, lineno, None, "expected a JSON object (one session per line)")
    try:
        m = _SessionModel.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _fail(path, lineno, _loc(err), err["msg"]) from None
    return _session_from_model(m, path, lineno)


def _header_obj(h: TraceHeader) -> dict:
    return {
        "format": h.format,
        "version": h.version,
        "seed": h.seed,
        "profile": h.profile,
        "block_size": h.block_size,
        "meta": h.meta,
    }


def session_obj(s: Session) -> dict:
    turns: dict[str, Any] = {
        "new_input_tokens": [t.new_input_tokens for t in s.turns],
        "output_tokens": [t.output_tokens for t in s.turns],
        "think_s": [t.think_s for t in s.turns],
    }
    spawns = {str(i): list(t.spawns) for i, t in enumerate(s.turns) if t.spawns}
    if spawns:
        turns["spawns"] = spawns
    hashed = {str(i): list(t.hash_ids) for i, t in enumerate(s.turns) if t.hash_ids is not None}
    if hashed:
        turns["hash_ids"] = hashed
        turns["input_tokens"] = {
            str(i): t.input_tokens for i, t in enumerate(s.turns) if t.hash_ids is not None
        }
    prompts = prompts_obj([t.prompt for t in s.turns])
    if prompts:
        turns["prompts"] = prompts
    obj: dict[str, Any] = {
        "id": s.id,
        "arrival_s": s.arrival_s,
        "system_tokens": s.system_tokens,
        "system_id": s.system_id,
    }
    if s.parent is not None:
        obj.update(parent=s.parent, fork_turn=s.fork_turn, mode=s.mode)
    obj["turns"] = turns
    return obj


def iter_lines(trace: Trace) -> Iterator[str]:
    yield json.dumps(_header_obj(trace.header), separators=(",", ":"))
    for s in trace.sessions:
        yield json.dumps(session_obj(s), separators=(",", ":"))


def write_trace(trace: Trace, path: str | Path) -> None:
    write_lines(iter_lines(trace), path)


def write_lines(lines: Iterable[str], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")
