"""records.jsonl -> a pandas DataFrame, validated: the records part of the loader (`analysis.run`).

Records are parsed column by column (one list per field) rather than as a list of dicts: a million records then cost a DataFrame, not a million
dicts. A truncated final line (an interrupted run) is skipped with a warning; any other bad line
is a `RunFolderError` naming the file and line.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson
import pandas as pd

from harness.errors import HarnessWarning, RunFolderError
from harness.schema import COUNT_FIELDS, FLOAT_FIELDS, PHASES, RECORD_FIELDS, RECORDS_FILE, STATUSES

# Without these a record cannot be classified; an ok record also needs its send and end times.
REQUIRED_FIELDS = ("request_id", "session_id", "status", "phase")
REQUIRED_WHEN_OK = ("t_sent", "t_done")


class RunFolderWarning(HarnessWarning):
    """Something in a run folder was skipped but the run is still usable."""


def read_records(path: Path) -> tuple[pd.DataFrame, list[str]]:
    if not path.is_file():
        raise RunFolderError(f"missing {RECORDS_FILE}", path=path)
    try:
        with path.open("rb") as fh:
            columns, lines, notes = _parse_lines(fh, path)
    except OSError as exc:
        raise RunFolderError(f"cannot read records ({exc.strerror})", path=path) from exc
    frame = _to_frame(columns, lines, path)
    check_required(frame, path)
    frame.attrs["path"] = str(path)
    return frame, notes


BLOCK = 20_000  # lines per orjson call: fast, and memory holds one block of dicts, not the file


def _blocks(fh: BinaryIO) -> Iterator[list[tuple[int, bytes]]]:
    """Non-blank lines with their 1-based numbers, BLOCK at a time."""
    block: list[tuple[int, bytes]] = []
    for lineno, raw in enumerate(fh, start=1):
        if raw.strip():
            block.append((lineno, raw))
            if len(block) == BLOCK:
                yield block
                block = []
    if block:
        yield block


def _parse_lines(fh: BinaryIO, path: Path) -> tuple[dict[str, list], list[int], list[str]]:
    columns: dict[str, list] = {name: [] for name in RECORD_FIELDS}
    lines: list[int] = []
    notes: list[str] = []
    blocks = _blocks(fh)
    block = next(blocks, None)
    while block is not None:
        following = next(blocks, None)
        if following is None:  # the file's last block: its final line may be half-written
            block = _drop_truncated_tail(block, path, notes)
        objs = _parse_block(block, path)
        for name, column in columns.items():
            column.extend([o.get(name) for o in objs])
        lines.extend(n for n, _ in block)
        block = following
    return columns, lines, notes


def _drop_truncated_tail(
    block: list[tuple[int, bytes]], path: Path, notes: list[str]
) -> list[tuple[int, bytes]]:
    lineno, raw = block[-1]
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as exc:  # an interrupted run leaves a half-written final line
        notes.append(warn(f"{path}:{lineno}: truncated final record skipped ({exc})"))
        return block[:-1]
    return block


def _parse_block(block: list[tuple[int, bytes]], path: Path) -> list[dict]:
    try:
        objs = orjson.loads(b"[" + b",".join(raw for _, raw in block) + b"]")
        if all(type(o) is dict for o in objs):
            return objs
    except orjson.JSONDecodeError:
        pass  # find and name the bad line below
    for lineno, raw in block:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RunFolderError(f"invalid JSON ({exc})", path=path, line=lineno) from exc
        if not isinstance(obj, dict):
            raise RunFolderError(
                "expected a JSON object (one record per line)", path=path, line=lineno
            )
    # Each line parses alone but not joined: one line holds several values ("{} {}").
    raise RunFolderError(
        "a line does not hold exactly one JSON object", path=path, line=block[0][0]
    )


def warn(message: str, stacklevel: int = 5) -> str:
    warnings.warn(message, RunFolderWarning, stacklevel=stacklevel)
    return message


def _to_frame(columns: dict[str, list], lines: list[int], path: Path) -> pd.DataFrame:
    frame = pd.DataFrame({"line": np.asarray(lines, dtype=np.int64)})
    for name in RECORD_FIELDS:
        values = columns[name]
        if name in FLOAT_FIELDS or name in COUNT_FIELDS:
            # None -> NaN; counts stay float so that "not reported" survives as NaN.
            frame[name] = _numeric(values, lines, path, name)
        else:
            frame[name] = pd.Series(values, dtype=object)
        values.clear()
    frame["error_class"] = [
        (e.get("class") if isinstance(e, dict) else None) for e in frame["error"].tolist()
    ]
    return frame


def _numeric(values: list, lines: list[int], path: Path, name: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        for value, line in zip(values, lines, strict=True):
            if value is not None and not isinstance(value, int | float):
                raise RunFolderError(
                    f"expected a number, got {value!r}", path=path, line=line, field=name
                ) from None
        raise


def check_required(frame: pd.DataFrame, path: Path) -> None:
    for name in REQUIRED_FIELDS:
        _check_present(frame, path, name, frame[name].isna().to_numpy())
    _check_enum(frame, path, "status", STATUSES)
    _check_enum(frame, path, "phase", PHASES)
    ok = (frame["status"] == "ok").to_numpy()
    for name in REQUIRED_WHEN_OK:
        _check_present(frame, path, name, ok & frame[name].isna().to_numpy(), " (the record is ok)")


def _check_present(
    frame: pd.DataFrame, path: Path, name: str, missing: np.ndarray, why: str = ""
) -> None:
    if missing.any():
        line = int(frame["line"].to_numpy()[missing.argmax()])
        raise RunFolderError(f"missing or null{why}", path=path, line=line, field=name)


def _check_enum(frame: pd.DataFrame, path: Path, name: str, allowed: tuple[str, ...]) -> None:
    bad = ~frame[name].isin(allowed).to_numpy()
    if bad.any():
        i = int(bad.argmax())
        value = frame[name].iloc[i]
        raise RunFolderError(
            f"{value!r} is not one of {', '.join(allowed)}",
            path=path,
            line=int(frame["line"].iloc[i]),
            field=name,
        )
