"""records.parquet: written by `harness analyze`, read back as the very frame records.jsonl gives."""

from __future__ import annotations

import gc
import os

import pandas as pd
import pytest

from harness.analysis import parquet
from harness.analysis.chunks import rows
from harness.analysis.loader import load_run
from harness.analysis.parquet import LISTS, PARQUET_FILE, is_fresh, read_parquet, save_records
from harness.analysis.records import RunFolderWarning, read_records
from harness.app.cli import main
from tests.analysis.golden import GOLDEN_RECORDS, rec, write_run
from tests.gc_spy import note_threshold

# Every shape a field takes: nulls in each column, empty and null lists, an error with an extra key.
ODD = [
    rec(
        "x1-0",
        "x1",
        3,
        (5.0, 5.1, None, None, 5.2),
        status="error",
        tokens=(None, None, None),
        error={"class": "HTTPError", "message": "500", "status": 500},
    ),
    dict(
        rec("x2-0", "x2", 0, (None, 5.3, 5.4, 5.4, 5.5), ([5.4], [7]), (0, 7, 0)),
        chunk_times=None,
        chunk_tokens=None,
        endpoint=None,
        parent_session_id=None,
    ),
]


def _run(tmp_path):
    return write_run(tmp_path / "r", records=[*GOLDEN_RECORDS, *ODD])


def test_parquet_round_trips_every_field_including_lists_and_nulls(tmp_path):
    path = _run(tmp_path)
    assert save_records(path) is None and is_fresh(path)
    from_json, _ = read_records(path / "records.jsonl")
    from_parquet, notes = read_parquet(path)
    # The list columns stay Arrow lists (values and offsets) until a reader asks for rows.
    assert all(isinstance(from_parquet[c].dtype, pd.ArrowDtype) for c in LISTS)
    as_rows = from_parquet.assign(
        **{c: pd.Series(rows(from_parquet[c]), dtype=object) for c in LISTS}
    )
    pd.testing.assert_frame_equal(as_rows, from_json)
    assert as_rows["chunk_times"].iloc[1] == [1.5, 1.7, 2.0] and as_rows["chunk_tokens"].iloc[
        1
    ] == [
        1,
        2,
        2,
    ]
    assert as_rows["chunk_times"].iloc[-1] is None and as_rows["chunk_times"].iloc[2] == []
    assert from_parquet["error"].iloc[-2] == {"class": "HTTPError", "message": "500", "status": 500}
    assert notes == []


@pytest.mark.slow
def test_loader_prefers_fresh_parquet_and_ignores_a_stale_one(tmp_path):
    path = _run(tmp_path)
    assert main(["analyze", str(path)]) == 0
    assert (path / PARQUET_FILE).is_file()
    assert load_run(path).records.attrs["source"] == PARQUET_FILE
    with (path / "records.jsonl").open("a") as fh:  # the run goes on: the copy is now stale
        fh.write('{"run_id": "golden", "request_id": "cut')
    stale = path / PARQUET_FILE
    os.utime(
        stale, ns=(stale.stat().st_atime_ns, (path / "records.jsonl").stat().st_mtime_ns + 10**9)
    )
    assert not is_fresh(path)  # newer but written from a shorter records.jsonl
    with pytest.warns(RunFolderWarning, match="truncated final record"):
        run = load_run(path)
    assert "source" not in run.records.attrs and len(run.records) == len(GOLDEN_RECORDS) + len(ODD)


def test_loader_warnings_survive_the_parquet_copy(tmp_path):
    path = _run(tmp_path)
    with (path / "records.jsonl").open("a") as fh:
        fh.write('{"run_id": "golden", "request_id": "cut')
    with pytest.warns(RunFolderWarning):
        save_records(path)
    run = load_run(path)
    assert run.records.attrs["source"] == PARQUET_FILE
    assert any("truncated final record" in w for w in run.warnings)


@pytest.mark.slow
def test_analysis_from_parquet_equals_analysis_from_json_lines(tmp_path):
    from harness.analysis.summary import analyze_run

    path = _run(tmp_path)
    from_json = analyze_run(path)
    save_records(path)
    assert analyze_run(path) == from_json


def test_a_parquet_written_before_a_field_existed_loads_it_as_absent(tmp_path):
    import pyarrow.parquet as pq

    path = _run(tmp_path)
    save_records(path)
    table = pq.read_table(path / PARQUET_FILE)
    old = table.drop_columns(["cached_tokens_device", "agent"])  # fields a newer harness added
    pq.write_table(old.replace_schema_metadata(table.schema.metadata), path / PARQUET_FILE)
    frame, _ = read_parquet(path)
    assert frame["cached_tokens_device"].isna().all() and frame["agent"].isna().all()
    from_json, _ = read_records(path / "records.jsonl")
    assert frame["request_id"].tolist() == from_json["request_id"].tolist()


def test_readers_of_the_list_columns_give_the_same_figures_from_either_form():
    """Python lists (records.jsonl) and Arrow lists (records.parquet), with empty, missing and
    count-less rows (one token per chunk), give the same ITL and token counts."""
    import numpy as np
    import pyarrow as pa

    from harness.analysis.chunks import arrow_lists
    from harness.analysis.metrics import completion_tokens, itl_of
    from harness.analysis.streamed import token_placement

    times = [[1.0, 1.5, 2.5], [], None, [3.0, 3.2], [4.0, 4.1, 4.4]]
    tokens = [[1, 2, 2], [], None, None, [1, 0, 3]]
    py = pd.DataFrame(
        {
            "line": range(5),
            "chunk_times": pd.Series(times, dtype=object),
            "chunk_tokens": pd.Series(tokens, dtype=object),
            "completion_tokens": [np.nan, 4.0, np.nan, np.nan, 4.0],
            "t_first_token": [1.0, np.nan, np.nan, 3.0, 4.0],
        }
    )
    arrow = py.assign(
        chunk_times=arrow_lists(pa.array(times, type=LISTS["chunk_times"])),
        chunk_tokens=arrow_lists(pa.array(tokens, type=LISTS["chunk_tokens"])),
    )
    for a, b in ((py, arrow), (py.iloc[[4, 0, 3]], arrow.iloc[[4, 0, 3]])):
        x, y = itl_of(a), itl_of(b)
        for field in ("values", "weights", "per_request", "owner"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))
        np.testing.assert_array_equal(completion_tokens(a), completion_tokens(b))
        assert token_placement(a) == token_placement(b)
    np.testing.assert_array_equal(completion_tokens(py), [5.0, 4.0, np.nan, np.nan, 4.0])


def test_reading_parquet_leaves_the_collector_as_it_is(tmp_path, monkeypatch):
    """No collector setting here: loading a million records measured the same with automatic
    collection off (docs/measurements/gc.md, 2026-12-06), so the plain code stays."""
    run = _run(tmp_path)
    save_records(run)
    seen: list[int] = []
    note_threshold(monkeypatch, parquet, "_read_parquet", seen)
    read_parquet(run)
    assert seen == [gc.get_threshold()[0]]
