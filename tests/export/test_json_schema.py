"""The published JSON Schemas: generated from the types, committed unchanged, and what a real
run's summary.json and records validate against (and a broken one does not)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from harness.analysis.summary import analyze_run
from harness.analysis.summary_types import SUMMARY_VERSION
from harness.app.cli import main
from harness.export.json_schema import RECORD_SCHEMA, SUMMARY_SCHEMA, drifted, schemas
from harness.schema import new_record
from tests.analysis.golden import GOLDEN_RECORDS, write_run

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, doc) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_committed_schemas_are_what_the_types_generate():
    assert drifted(SCHEMAS) == [], "run `harness export schema` and commit schemas/"
    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(schemas())


def test_the_schema_names_carry_the_versions():
    assert f"summary.v{SUMMARY_VERSION}.schema.json" == SUMMARY_SCHEMA
    assert RECORD_SCHEMA.startswith("record.v")


def test_check_fails_on_a_drifted_schema(tmp_path, capsys):
    assert main(["export", "schema", "-o", str(tmp_path)]) == 0
    assert main(["export", "schema", "-o", str(tmp_path), "--check"]) == 0
    path = tmp_path / SUMMARY_SCHEMA
    path.write_text(path.read_text().replace('"ttft_s"', '"ttft"', 1))
    assert main(["export", "schema", "-o", str(tmp_path), "--check"]) == 1
    assert SUMMARY_SCHEMA in capsys.readouterr().out


@pytest.mark.slow
def test_a_real_run_validates(simulated_run):
    summary = json.loads((simulated_run / "summary.json").read_text())
    assert _errors(_validator(SUMMARY_SCHEMA), summary) == []
    records = _validator(RECORD_SCHEMA)
    for line in (simulated_run / "records.jsonl").read_text().splitlines():
        assert _errors(records, json.loads(line)) == []


@pytest.mark.slow
def test_failures_and_missing_usage_validate(tmp_path):
    # a timeout, a server without usage, warm-up, cool-down; each record as the driver makes one
    records = [new_record(**r) for r in GOLDEN_RECORDS]
    summary = analyze_run(write_run(tmp_path / "golden", records))
    assert _errors(_validator(SUMMARY_SCHEMA), json.loads(json.dumps(summary))) == []
    v = _validator(RECORD_SCHEMA)
    for line in (tmp_path / "golden" / "records.jsonl").read_text().splitlines():
        assert _errors(v, json.loads(line)) == []


@pytest.mark.slow
def test_a_broken_summary_or_record_does_not_validate(tmp_path):
    summary = analyze_run(write_run(tmp_path / "golden", [new_record(**r) for r in GOLDEN_RECORDS]))
    doc = json.loads(json.dumps(summary))
    v = _validator(SUMMARY_SCHEMA)
    for broken in (
        {k: x for k, x in doc.items() if k != "ttft_s"},
        {**doc, "requests_total": "12"},
        {**doc, "summary_version": SUMMARY_VERSION + 1},
    ):
        assert _errors(v, broken)
    rec = json.loads((tmp_path / "golden" / "records.jsonl").read_text().splitlines()[0])
    v = _validator(RECORD_SCHEMA)
    assert _errors(v, rec) == []
    for broken in (
        {**rec, "status": "fine"},
        {k: x for k, x in rec.items() if k != "t_sent"},
        {**rec, "chunk_tokens": [1.5]},
    ):
        assert _errors(v, broken)
