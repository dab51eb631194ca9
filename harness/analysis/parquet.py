"""records.parquet: the column form of records.jsonl, written by `harness analyze`, read first by
`load_run` while it is up to date.

records.jsonl stays the contract (the driver appends to it; people grep it); the Parquet copy is a
cache of the parsed frame so notebooks load a million records in about a second instead of
re-parsing JSON. It is up to date when it is not older than records.jsonl and was written from a
records.jsonl of the same size; otherwise the loader ignores it and parses the JSON Lines.

Columns: every record field with its JSON type (strings; counts as nullable int64; times as
float64; `chunk_times`/`chunk_tokens` as lists), `error` and `wire` as their JSON text (any object round-trips),
and `line`, the record's line in records.jsonl, so errors found later still name it. The loader's
warnings (a skipped truncated line) travel in the file's metadata.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.analysis import chunks
from harness.analysis.records import read_records
from harness.atomic import replacing
from harness.errors import ParquetSkipped
from harness.schema import COUNT_FIELDS, FLOAT_FIELDS, PARQUET_FILE, RECORD_FIELDS, RECORDS_FILE

META_KEY = b"harness"
JSON_FIELDS = ("error", "wire")  # objects, kept as their JSON text
LISTS = {"chunk_times": pa.list_(pa.float64()), "chunk_tokens": pa.list_(pa.int64())}


def is_fresh(run_dir: Path) -> bool:
    cache, source = run_dir / PARQUET_FILE, run_dir / RECORDS_FILE
    if not cache.is_file():
        return False
    if not source.is_file():
        return True  # a folder shipped with Parquet only
    if cache.stat().st_mtime_ns < source.stat().st_mtime_ns:
        return False
    return _metadata(cache).get("records_jsonl_bytes") == source.stat().st_size


def _metadata(path: Path) -> dict:
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(META_KEY, b"{}"))


def save_records(run_dir: Path) -> str | None:
    """`harness analyze`'s step: bring records.parquet up to date; a reason when it could not."""
    if is_fresh(run_dir):
        return None
    frame, notes = read_records(
        run_dir / RECORDS_FILE
    )  # its warnings (not the manifest's) travel along
    try:
        write_parquet(frame, run_dir, notes)
    except (ParquetSkipped, OSError) as exc:
        return f"records.parquet not written ({exc}); readers parse records.jsonl"
    return None


def write_parquet(frame: pd.DataFrame, run_dir: Path, notes: list[str]) -> Path:
    """Write `frame` (as `read_records` returns it) to run_dir/records.parquet, atomically."""
    source = run_dir / RECORDS_FILE
    meta = {
        "records_jsonl_bytes": source.stat().st_size if source.is_file() else None,
        "warnings": notes,
    }
    table = to_table(frame).replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    out = run_dir / PARQUET_FILE
    with replacing(out) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return out


def to_table(frame: pd.DataFrame) -> pa.Table:
    columns = {"line": pa.array(frame["line"].to_numpy(dtype=np.int64))}
    try:
        for name in RECORD_FIELDS:
            columns[name] = _column(name, frame[name])
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise ParquetSkipped(f"field {name!r}: {exc}") from exc
    return pa.table(columns)


def _column(name: str, values: pd.Series) -> pa.Array:
    if name in FLOAT_FIELDS:
        return pa.array(values.to_numpy(dtype=float), type=pa.float64(), from_pandas=True)
    if name in COUNT_FIELDS:
        v = values.to_numpy(dtype=float)
        missing = np.isnan(v)
        if not np.array_equal(v[~missing], np.round(v[~missing])):
            raise ValueError("a count that is not a whole number")
        return pa.array(np.where(missing, 0, v).astype(np.int64), mask=missing)
    if name in LISTS:
        if isinstance(values.dtype, pd.ArrowDtype):  # a frame read from Parquet: already lists
            return pa.array(values.array).cast(LISTS[name])
        return pa.array(values.tolist(), type=LISTS[name])
    if name in JSON_FIELDS:
        return pa.array(
            [None if e is None else orjson.dumps(e).decode() for e in values], type=pa.string()
        )
    return pa.array(values.tolist(), type=pa.string())


def read_parquet(run_dir: Path) -> tuple[pd.DataFrame, list[str]]:
    """The frame `read_records` would return for the same records, and the loader's warnings."""
    return _read_parquet(run_dir)


def _read_parquet(run_dir: Path) -> tuple[pd.DataFrame, list[str]]:
    path = run_dir / PARQUET_FILE
    strings = [f for f in RECORD_FIELDS if f not in FLOAT_FIELDS + COUNT_FIELDS and f not in LISTS]
    table = pq.read_table(path, read_dictionary=[f for f in strings if f not in JSON_FIELDS])
    n, names = table.num_rows, set(table.column_names)
    columns: dict[str, object] = {"line": table.column("line").to_numpy()}
    for name in RECORD_FIELDS:
        if name in names:
            columns[name] = _frame_column(name, table.column(name).combine_chunks())
        else:  # written before the field existed: absent, as in records.jsonl
            numeric = name in FLOAT_FIELDS or name in COUNT_FIELDS
            columns[name] = np.full(n, np.nan) if numeric else np.full(n, None, dtype=object)
    errors, error_class = columns["error"], [None] * n
    assert isinstance(errors, np.ndarray)
    for i in _valid_rows(errors):
        error_class[i] = errors[i].get("class") if isinstance(errors[i], dict) else None
    columns["error_class"] = error_class  # a list: pandas infers its dtype as from records.jsonl
    # A column at a time: one frame from a dict would stack the numeric columns into one 2-D
    # block, a copy that cost more than the whole read; strings stay object, as from JSON.
    frame = pd.DataFrame({"line": _as_object(columns.pop("line"))})
    for name, values in columns.items():
        frame[name] = _as_object(values)
    # Line numbers are records.jsonl's, so errors found later name that file.
    source = run_dir / RECORDS_FILE
    frame.attrs["path"] = str(source if source.is_file() else path)
    frame.attrs["source"] = PARQUET_FILE
    return frame, list(_metadata(path).get("warnings", []))


def _frame_column(name: str, column: pa.Array) -> object:
    if name in FLOAT_FIELDS or name in COUNT_FIELDS:
        return column.to_numpy(zero_copy_only=False).astype(float, copy=False)
    if name in LISTS:
        return chunks.arrow_lists(column)  # rows are built only where a reader needs them
    if name in JSON_FIELDS:  # JSON text; almost every record has none
        out = np.full(len(column), None, dtype=object)
        for i, text in zip(_valid_rows(column), column.drop_null().to_pylist(), strict=True):
            out[i] = orjson.loads(text)
        return out
    return _strings(column)


def _strings(column: pa.Array) -> np.ndarray:
    """Python strings (None for null) as an object array. Read as a dictionary, a column of few
    distinct values (status, phase, endpoint, session ids) builds each string once, not per row."""
    if not isinstance(column, pa.DictionaryArray):
        return column.to_numpy(zero_copy_only=False)
    words = np.array([*column.dictionary.to_pylist(), None], dtype=object)
    codes = column.indices.fill_null(len(column.dictionary)).to_numpy(zero_copy_only=False)
    return words[codes]


def _as_object(values: object) -> object:
    """A Series on the array itself (setting a bare array into a frame copies it); object arrays
    stay object (pandas would infer its string dtype)."""
    if isinstance(values, np.ndarray):
        return pd.Series(values, dtype=values.dtype, copy=False)
    return values


def _valid_rows(values) -> list[int]:
    """Positions of the non-null entries of an Arrow array or an object array."""
    if isinstance(values, pa.Array):
        return np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False)).tolist()
    present = np.array([v is not None for v in values], dtype=bool)
    return np.flatnonzero(present).tolist()
