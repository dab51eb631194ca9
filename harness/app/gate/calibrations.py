"""Calibrations keyed by what they measured, and the one a gate may quote.

A calibration's rates hold for the rule it replayed, the runner and target it ran (the engine's
configuration less the slowdown it injects, or the endpoints and model) and the scenario (its
name, workload and load). `harness gate --calibrate` writes its calibration.json with that key
and installs a copy under `RESULTS/calibrations/`, one file per key; `harness gate` quotes only
a calibration whose key is its own, and otherwise says that none matches, how the nearest one
differs, and the command that makes one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from harness.analysis.compare.settings import differences, flatten
from harness.app.scenario import Scenario

CALIBRATIONS_DIR = "calibrations"
INJECTED = "step_time_scale"  # the slowdown a calibration sets on its arms: not the target's


def calibration_key(scenario: Scenario, rule: Any) -> dict:
    """What a calibration measured, and a gate must match: rule, runner, target, scenario."""
    target = scenario.target.model_dump(mode="json", by_alias=True)
    options = dict((target.get("engine") or {}).get("options") or {})
    options.pop(INJECTED, None)
    if scenario.target.kind == "engine":
        target["engine"]["options"] = options
        runner = str(options.get("runner", "torch"))
    else:
        target.pop("engine", None)  # not used by endpoints: no part of what was measured
        runner = "endpoint"
    return {
        "rule": rule.to_json(),
        "runner": runner,
        "target": target,
        "scenario": {
            "name": scenario.name,
            "workload": scenario.workload.model_dump(mode="json", by_alias=True),
            "load": scenario.load.model_dump(mode="json", by_alias=True),
        },
    }


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def install(path: Path, results_dir: Path) -> Path:
    """A copy of the calibration at `path` where gates look for it, named by its key."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    folder = results_dir / CALIBRATIONS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    installed = folder / f"{doc['key']['runner']}-{key_digest(doc['key'])}.json"
    shutil.copyfile(path, installed)
    return installed


def quoted(key: dict, candidates: list[Path]) -> tuple[dict | None, str | None]:
    """(the calibration among `candidates` (files) whose key is `key`, None) or (None, why none
    matches: the nearest one's differences, and how to make one)."""
    if key["runner"] == "endpoint":
        return None, (
            "none for an endpoint: a calibration slows the bundled engine (target.kind: engine); "
            'docs/metrics.md, "Gate", gives the rates measured on it'
        )
    docs = [d for p in candidates if (d := _read(p)) is not None]
    for doc in docs:
        if doc.get("key") == key:
            return doc, None
    want = flatten(key, "")
    nearest = [differences(flatten(d["key"], ""), want) for d in docs if d.get("key")]
    nearest.sort(key=lambda words: words.count(" vs "))
    how = "harness gate SCENARIO [the same --set flags] --calibrate -o DIR makes one"
    if not nearest:
        older = " (those found do not say what they measured: older files)" if docs else ""
        return None, f"no calibration of this gate ({key['runner']} runner){older}: {how}"
    return None, (
        f"no calibration matches this gate; the nearest differs in {nearest[0]} (its value vs "
        f"this gate's): {how}"
    )


def candidates(given: Path | None, results_dir: Path) -> list[Path]:
    """The files to look in: `--calibration` (a file or a folder), else RESULTS/calibrations/."""
    where = given or results_dir / CALIBRATIONS_DIR
    if where.is_file():
        return [where]
    return sorted(where.glob("*.json")) if where.is_dir() else []


def _read(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and "rates" in doc else None
