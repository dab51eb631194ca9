"""The one record type and the typed manifest sections: writer and reader share one declaration."""

from __future__ import annotations

import dataclasses

import pytest

from harness.driver.config import ReplayConfig
from harness.schema import (
    COUNT_FIELDS,
    FLOAT_FIELDS,
    RECORD_FIELDS,
    Record,
    ReplaySettings,
    new_record,
)


def test_every_field_the_analyzer_reads_of_replay_is_one_the_driver_writes():
    written = ReplayConfig().as_dict()
    read = {f.name for f in dataclasses.fields(ReplaySettings)}
    assert read <= written.keys(), read - written.keys()  # a renamed config field fails here
    settings = ReplaySettings.of({"replay": written})
    assert all(
        getattr(settings, name) == written[name] for name in read if written[name] is not None
    )


def test_a_manifest_without_replay_reads_as_the_defaults():
    assert ReplaySettings.of({}) == ReplaySettings.of({"replay": None}) == ReplaySettings()
    assert ReplaySettings.of({"replay": {"load": "open", "unknown": 1}}).load == "open"


def test_a_new_record_has_every_field_and_rejects_others():
    rec = new_record(request_id="a:0", session_id="a")
    assert tuple(rec) == RECORD_FIELDS == tuple(Record.__annotations__)
    assert rec["chunk_times"] == [] and rec["attempt"] == 1 and rec["phase"] == "measure"
    assert new_record()["chunk_times"] is not rec["chunk_times"]  # no list shared between records
    with pytest.raises(ValueError, match="not record fields: \\['t_sentt'\\]"):
        new_record(t_sentt=1.0)


def test_the_numeric_columns_come_from_the_declaration():
    assert FLOAT_FIELDS == ("t_scheduled", "t_sent", "t_first_token", "t_last_token", "t_done")
    assert "turn" in COUNT_FIELDS and "cached_tokens" in COUNT_FIELDS
    assert not set(FLOAT_FIELDS) & set(COUNT_FIELDS)
