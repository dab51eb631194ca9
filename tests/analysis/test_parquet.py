"""records.parquet: written by `harness analyze`, read back as the very frame records.jsonl gives."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from harness.analysis.parquet import PARQUET_FILE, is_fresh, read_parquet, save_records
from harness.analysis.records import RunFolderWarning, read_records
from harness.analysis.run import load_run
from harness.cli import main
from tests.analysis.golden import GOLDEN_RECORDS, rec, write_run

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
    pd.testing.assert_frame_equal(from_parquet, from_json)
    assert from_parquet["chunk_times"].iloc[1] == [1.5, 1.7, 2.0] and from_parquet[
        "chunk_tokens"
    ].iloc[1] == [1, 2, 2]
    assert (
        from_parquet["chunk_times"].iloc[-1] is None and from_parquet["chunk_times"].iloc[2] == []
    )
    assert from_parquet["error"].iloc[-2] == {"class": "HTTPError", "message": "500", "status": 500}
    assert notes == []


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
