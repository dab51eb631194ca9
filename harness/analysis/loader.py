"""THE loader of a run folder: records, manifest, summary and trace -> a `Run`. It reads; it never
computes (the ideal cache, tasks and the measured window are steps of `analysis.summary.analyze`).

Everything that reads results (analyzer, compare, report, notebooks) goes through `load_run`,
so a run folder is validated in one place. A `Run` can also be built by hand (a notebook's
records from elsewhere): `analyze` gives it the same figures as a loaded one.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from harness.analysis.ending import run_ending
from harness.analysis.records import check_required, read_records, warn
from harness.errors import RunFolderError, TraceFormatError
from harness.schema import (
    MANIFEST_FILE,
    MANIFEST_REQUIRED,
    PARQUET_FILE,
    RECORD_SCHEMA_VERSION,
    RECORDS_FILE,
    SCENARIO_FILE,
    SUMMARY_FILE,
    TRACE_FILE,
    ReplaySettings,
)
from harness.trace.model import Trace
from harness.trace.native import read_trace


@dataclass(frozen=True)
class Run:
    """A run folder as read. `analyze` never changes it: it works on its own copy of `records`."""

    path: Path
    records: pd.DataFrame  # every record, all phases; `line` is its line in records.jsonl
    manifest: dict
    summary: Mapping[str, Any] | None = None
    trace: Trace | None = None
    warnings: tuple[str, ...] = ()
    scenario: Mapping[str, Any] | None = None  # scenario.yaml as written (its words), if any

    @property
    def name(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def simulated(self) -> bool:
        return bool(self.manifest.get("simulated", False))

    @property
    def replay(self) -> ReplaySettings:
        """The driver's settings the analysis depends on (manifest `replay`), typed."""
        return ReplaySettings.of(self.manifest)

    @property
    def measured(self) -> pd.DataFrame:
        """Records of the measurement window (warm-up and cool-down excluded), any status."""
        return self.records[self.records["phase"] == "measure"]

    @property
    def ok(self) -> pd.DataFrame:
        """The records every latency metric is computed from: measured and status ok."""
        m = self.measured
        return m[m["status"] == "ok"]


def load_run(path: str | Path, *, with_trace: bool = True) -> Run:
    path = Path(path)
    if not path.is_dir():
        raise RunFolderError("not a run folder (no such directory)", path=path)
    records, notes = _read_run_records(path)
    manifest = read_manifest(path / MANIFEST_FILE, notes)
    notes += _think_cap_note(manifest)
    ending = run_ending(manifest)
    if ending is not None:
        notes.append(warn(f"{path}: {ending}", stacklevel=3))
    trace = _read_trace(path / TRACE_FILE, notes) if with_trace else None
    summary = read_optional_json(path / SUMMARY_FILE)
    scenario = _read_scenario(path / SCENARIO_FILE, notes)
    return Run(path, records, manifest, summary, trace, tuple(notes), scenario)


def load_runs(paths: Iterable[str | Path], *, with_trace: bool = True) -> list[Run]:
    """Several runs, e.g. repeats to pool or runs to compare; globs are expanded."""
    return [load_run(p, with_trace=with_trace) for p in expand_run_dirs(paths)]


def _think_cap_note(manifest: dict) -> list[str]:
    capped = manifest.get("think_capped") or {}
    if not capped.get("pauses"):
        return []
    return [
        f"think time capped at {capped['cap_s']:g} s: {capped['pauses']} pauses shortened, "
        f"{capped['seconds_cut']:,.0f} s of waiting cut (load.think_cap_s)"
    ]


# The [parquet] extra: records.parquet written by `harness analyze` and read while up to date.
ARROW = find_spec("pyarrow") is not None


def _read_run_records(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """records.parquet while it is up to date (with the [parquet] extra), else records.jsonl."""
    jsonl = path / RECORDS_FILE
    if not (path / PARQUET_FILE).is_file() or (jsonl.is_file() and not ARROW):
        return read_records(jsonl)
    # pyarrow: without it, only a folder shipped with Parquet alone gets here (one line, exit 2)
    from harness.analysis import parquet

    if not parquet.is_fresh(path):
        return read_records(jsonl)
    frame, notes = parquet.read_parquet(path)
    check_required(frame, Path(frame.attrs["path"]))
    return frame, notes


def _read_scenario(path: Path, notes: list[str]) -> dict | None:
    """The resolved scenario the run wrote, as plain data: a comparison names what differs in the
    scenario file's own words. One that does not read is left out with a warning."""
    if not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        notes.append(warn(f"{path}: cannot read ({exc}); compared without it", stacklevel=4))
        return None
    return doc if isinstance(doc, dict) else None


def _read_trace(path: Path, notes: list[str]) -> Trace | None:
    """The run's trace; one that does not read costs only the session structure (a warning)."""
    if not path.is_file():
        return None
    try:
        return read_trace(path)
    except TraceFormatError as exc:
        notes.append(warn(f"{exc}; session structure inferred from timing instead", stacklevel=4))
        return None


def expand_run_dirs(patterns: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for pattern in patterns:
        text = str(pattern)
        if glob.has_magic(text):
            matches = sorted(Path(p) for p in glob.glob(text) if _run_folder(Path(p)))
            if not matches:
                raise RunFolderError("the pattern matches no run folder", path=text)
            out.extend(matches)
        else:
            out.append(Path(text))
    return out


def _run_folder(path: Path) -> bool:
    """What a glob may match: a folder with records or a manifest (not `compare/`'s pages)."""
    return (path / RECORDS_FILE).is_file() or (path / MANIFEST_FILE).is_file()


def read_manifest(path: Path, notes: list[str]) -> dict:
    """The manifest; records from elsewhere (no manifest, or one without the required keys) are
    analyzed with a warning naming what is missing: the run id is then the folder's name, the GPU
    count --gpus (else 1), and server-side figures are absent."""
    if not path.is_file():
        notes.append(
            warn(
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
            warn(
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


def read_optional_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RunFolderError(f"cannot read ({exc})", path=path) from exc
