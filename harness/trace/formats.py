"""Every trace format the harness reads and writes, behind one loader.

    native    our JSON Lines (`native.py`): header line + one session per line
    mooncake  Mooncake JSONL (`mooncake.py`): one request per line, block-level hash ids
    weka      Weka / AgentX JSON or JSONL, or a directory of them (`weka.py`, `weka_export.py`):
              nested requests and subagent groups

`load_trace(path)` detects the format from the first record; pass `fmt` to force one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson

from harness.errors import TraceFormatError
from harness.trace.model import TRACE_FORMAT, Trace
from harness.trace.mooncake import MOONCAKE_BLOCK, read_mooncake, write_mooncake
from harness.trace.native import read_trace, write_trace
from harness.trace.weka import read_weka
from harness.trace.weka_export import DEFAULT_MODEL, write_weka

FORMATS = ("native", "mooncake", "weka")
__all__ = ["FORMATS", "detect_format", "load_trace", "save_trace", "write_mooncake", "write_weka"]


def _first_record(path: Path) -> object:
    try:
        with path.open("rb") as fh:
            for raw in fh:
                if raw.strip():
                    try:
                        return orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        return raw.lstrip()[:1]  # a JSON document spread over lines
    except OSError as exc:
        raise TraceFormatError(f"cannot open trace: {exc.strerror}", path=path) from exc
    raise TraceFormatError("empty file", path=path)


def detect_format(path: str | Path) -> str:
    path = Path(path)
    if path.is_dir():  # published corpora: a directory of one-trace Weka/AgentX files
        return "weka"
    first = _first_record(path)
    if isinstance(first, dict):
        if first.get("format") == TRACE_FORMAT:
            return "native"
        if "hash_ids" in first and "input_length" in first:
            return "mooncake"
        if "requests" in first:
            return "weka"
    if first in (b"{", b"[") or isinstance(first, list):
        return "weka"
    raise TraceFormatError(
        "unrecognized trace format (expected native, Mooncake or Weka/AgentX JSON)",
        path=path,
        line=1,
    )


def load_trace(
    path: str | Path,
    fmt: str = "auto",
    *,
    block_size: int | None = None,
    group_sessions: bool = False,
) -> Trace:
    """Read any supported trace. `block_size` and `group_sessions` apply to Mooncake files."""
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "native":
        return read_trace(path)
    if fmt == "mooncake":
        return read_mooncake(
            path, block_size=block_size or MOONCAKE_BLOCK, group_sessions=group_sessions
        )
    if fmt == "weka":
        return read_weka(path)
    raise TraceFormatError(
        f"unknown trace format {fmt!r} (one of: auto, {', '.join(FORMATS)})", path=path
    )


def save_trace(
    trace: Trace,
    path: str | Path,
    fmt: str = "native",
    *,
    block_size: int | None = None,
    salt: str | None = None,
    scope: str = "local",
    model: str = DEFAULT_MODEL,
    progress: Callable[[int], None] | None = None,
) -> None:
    """`block_size` and `salt` apply to Mooncake output; `scope` and `model` to Weka output.
    `progress(n)` is called with the requests (Mooncake) or traces (Weka) written so far."""
    if fmt == "native":
        write_trace(trace, path)
    elif fmt == "mooncake":
        write_mooncake(
            trace, path, block_size=block_size or MOONCAKE_BLOCK, salt=salt, progress=progress
        )
    elif fmt == "weka":
        write_weka(trace, path, scope=scope, model=model, progress=progress)
    else:
        raise TraceFormatError(
            f"cannot write format {fmt!r} (one of: {', '.join(FORMATS)})", path=path
        )
