"""THE loader of a run folder: records.jsonl -> pandas DataFrame, plus manifest, summary and trace.

Everything that reads results (analyzer, compare, report, notebooks) goes through `load_run`,
so a run folder is validated in one place. Records are parsed column by column (one list per
field) rather than as a list of dicts: a million records then cost a DataFrame, not a million
dicts. A truncated final line (an interrupted run) is skipped with a warning; any other bad line
is a `RunFolderError` naming the file and line.
"""

from __future__ import annotations

import glob
import json
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import orjson
import pandas as pd

from harness.errors import HarnessWarning, RunFolderError, TraceFormatError
from harness.schema import (
    MANIFEST_FILE,
    MANIFEST_REQUIRED,
    PHASES,
    RECORD_FIELDS,
    RECORD_SCHEMA_VERSION,
    RECORDS_FILE,
    STATUSES,
    SUMMARY_FILE,
    TRACE_FILE,
)
from harness.trace.model import Trace

if TYPE_CHECKING:
    from harness.analysis.granularity import Granularity

# Without these a record cannot be classified; an ok record also needs its send and end times.
REQUIRED_FIELDS = ("request_id", "session_id", "status", "phase")
REQUIRED_WHEN_OK = ("t_sent", "t_done")
FLOAT_FIELDS = ("t_scheduled", "t_sent", "t_first_token", "t_last_token", "t_done")
COUNT_FIELDS = (
    "turn",
    "prompt_tokens_expected",
    "output_tokens_expected",
    "cached_tokens_ideal",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "attempt",
)


class RunFolderWarning(HarnessWarning):
    """Something in a run folder was skipped but the run is still usable."""


@dataclass
class Run:
    path: Path
    records: pd.DataFrame  # every record, all phases; `line` is its line in records.jsonl
    manifest: dict
    summary: dict | None = None
    trace: Trace | None = None
    warnings: list[str] = field(default_factory=list)
    granularity: Granularity | None = None  # the block size of the ideal, and why (analysis.ideal)
    ideal_source: str | None = None  # "trace" (recomputed), "records" (as recorded) or None
    token_space: dict | None = None  # whose tokens the ideal counts (analysis.server_tokens)

    @property
    def name(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def simulated(self) -> bool:
        return bool(self.manifest.get("simulated", False))

    @cached_property
    def measured(self) -> pd.DataFrame:
        """Records of the measurement window (warm-up and cool-down excluded), any status."""
        return self.records[self.records["phase"] == "measure"]

    @cached_property
    def ok(self) -> pd.DataFrame:
        """The records every latency metric is computed from: measured and status ok."""
        m = self.measured
        return m[m["status"] == "ok"]


def load_run(
    path: str | Path,
    *,
    with_trace: bool = True,
    block_size: int | None = None,
    tokenizer: str | None = None,
) -> Run:
    """`block_size`: of the ideal prefix cache (default: the run's; see analysis.ideal);
    `tokenizer`: the server's tokenizer folder, to count chat prompts in its tokens."""
    path = Path(path)
    if not path.is_dir():
        raise RunFolderError("not a run folder (no such directory)", path=path)
    records, notes = _read_run_records(path)
    manifest = read_manifest(path / MANIFEST_FILE, notes)
    run = Run(path=path, records=records, manifest=manifest, warnings=notes)
    capped = manifest.get("think_capped") or {}
    if capped.get("pauses"):
        run.warnings.append(
            f"think time capped at {capped['cap_s']:g} s: {capped['pauses']} pauses shortened, "
            f"{capped['seconds_cut']:,.0f} s of waiting cut (load.think_cap_s)"
        )
    run.summary = read_optional_json(path / SUMMARY_FILE)
    if with_trace and (path / TRACE_FILE).is_file():
        run.trace = _read_trace(path / TRACE_FILE, run.warnings)
    from harness.analysis.ideal import fill_ideal

    fill_ideal(run, block_size, tokenizer)
    return run


def _read_run_records(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """records.parquet while it is up to date (written by `harness analyze`), else records.jsonl."""
    from harness.analysis.parquet import is_fresh, read_parquet

    if not is_fresh(path):
        return read_records(path / RECORDS_FILE)
    frame, notes = read_parquet(path)
    _check_required(frame, Path(frame.attrs["path"]))
    return frame, notes


def _read_trace(path: Path, notes: list[str]) -> Trace | None:
    """The run's trace; one that does not read costs only the session structure (a warning)."""
    from harness.trace.native import read_trace

    try:
        return read_trace(path)
    except TraceFormatError as exc:
        notes.append(_warn(f"{exc}; session structure inferred from timing instead", stacklevel=3))
        return None


def load_runs(
    paths: Iterable[str | Path],
    *,
    with_trace: bool = True,
    block_size: int | None = None,
    tokenizer: str | None = None,
) -> list[Run]:
    """Several runs, e.g. repeats to pool or runs to compare; globs are expanded."""
    return [
        load_run(p, with_trace=with_trace, block_size=block_size, tokenizer=tokenizer)
        for p in expand_run_dirs(paths)
    ]


def expand_run_dirs(patterns: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for pattern in patterns:
        text = str(pattern)
        if glob.has_magic(text):
            matches = sorted(Path(p) for p in glob.glob(text) if Path(p).is_dir())
            if not matches:
                raise RunFolderError("the pattern matches no run folder", path=text)
            out.extend(matches)
        else:
            out.append(Path(text))
    return out


def read_manifest(path: Path, notes: list[str]) -> dict:
    """The manifest; records from elsewhere (no manifest, or one without the required keys) are
    analyzed with a warning naming what is missing: the run id is then the folder's name, the GPU
    count --gpus (else 1), and server-side figures are absent."""
    if not path.is_file():
        notes.append(
            _warn(
                f"{path}: no {MANIFEST_FILE}; run id from the folder name, GPUs from "
                f"--gpus (else 1), no server /metrics",
                stacklevel=4,
            )
        )
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFolderError(f"cannot read manifest ({exc})", path=path) from exc
    if not isinstance(manifest, dict):
        raise RunFolderError("the manifest must be a JSON object", path=path)
    missing = [key for key in MANIFEST_REQUIRED if key not in manifest]
    if missing:
        notes.append(
            _warn(
                f"{path}: partial manifest, missing {', '.join(missing)}; analyzed without them",
                stacklevel=4,
            )
        )
    version = manifest.get("schema_version", RECORD_SCHEMA_VERSION)
    if version != RECORD_SCHEMA_VERSION:
        raise RunFolderError(
            f"unknown record schema version {version!r} (this harness reads {RECORD_SCHEMA_VERSION})",
            path=path,
            field="schema_version",
        )
    return manifest


def read_records(path: Path) -> tuple[pd.DataFrame, list[str]]:
    if not path.is_file():
        raise RunFolderError(f"missing {RECORDS_FILE}", path=path)
    try:
        with path.open("rb") as fh:
            columns, lines, notes = _parse_lines(fh, path)
    except OSError as exc:
        raise RunFolderError(f"cannot read records ({exc.strerror})", path=path) from exc
    frame = _to_frame(columns, lines, path)
    _check_required(frame, path)
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
        notes.append(_warn(f"{path}:{lineno}: truncated final record skipped ({exc})"))
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


def _warn(message: str, stacklevel: int = 5) -> str:
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


def _check_required(frame: pd.DataFrame, path: Path) -> None:
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


def read_optional_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RunFolderError(f"cannot read ({exc})", path=path) from exc
