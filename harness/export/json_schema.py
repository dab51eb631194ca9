"""The published JSON Schemas of summary.json and of a record (records.jsonl's lines), generated
from their typed definitions (`analysis.summary_types.Summary`, `schema.Record`) by pydantic,
versioned with `SUMMARY_VERSION` and `RECORD_SCHEMA_VERSION`, and kept in the repository's
`schemas/` (`harness export schema` writes them; a test fails when they drift).

A CI tool validates what it parses against them (docs/export.md); extra keys are allowed, so a
newer harness's additions do not fail an older schema, and a removed or retyped key does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from harness.analysis.summary_types import SUMMARY_VERSION, Summary
from harness.schema import PHASES, RECORD_SCHEMA_VERSION, STATUSES, Record

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SUMMARY_SCHEMA = f"summary.v{SUMMARY_VERSION}.schema.json"
RECORD_SCHEMA = f"record.v{RECORD_SCHEMA_VERSION}.schema.json"


def summary_schema() -> dict[str, Any]:
    schema = TypeAdapter(Summary).json_schema()
    schema["properties"]["summary_version"]["const"] = SUMMARY_VERSION
    return _published(
        schema, SUMMARY_SCHEMA, f"agentic-harness summary.json, version {SUMMARY_VERSION}"
    )


def record_schema() -> dict[str, Any]:
    schema = TypeAdapter(Record).json_schema()
    schema["properties"]["status"]["enum"] = list(STATUSES)
    schema["properties"]["phase"]["enum"] = list(PHASES)
    return _published(
        schema,
        RECORD_SCHEMA,
        f"agentic-harness record (one line of records.jsonl), version {RECORD_SCHEMA_VERSION}",
    )


def _published(schema: dict[str, Any], name: str, title: str) -> dict[str, Any]:
    return {"$schema": DRAFT, "$id": name, **schema, "title": title}


def schemas() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every published schema."""
    return {SUMMARY_SCHEMA: summary_schema(), RECORD_SCHEMA: record_schema()}


def render(schema: dict[str, Any]) -> str:
    """One schema as committed: indented, keys in the generator's order, a final newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = folder / name
        path.write_text(render(schema), encoding="utf-8")
        written.append(path)
    return written


def drifted(folder: Path) -> list[str]:
    """The published schemas in `folder` that differ from what the types now generate."""
    return [
        name
        for name, schema in schemas().items()
        if not (folder / name).is_file()
        or (folder / name).read_text(encoding="utf-8") != render(schema)
    ]
