"""What an MLflow run holds of a run folder: parameters from the manifest, metrics from
summary.json's headline, tags naming the run and any verdict on it (docs/export.md).

Plain dictionaries, no MLflow here: the client (`mlflow_runs.py`) logs them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.analysis.loader import read_optional_json

PARAM_CHARS = 500  # a parameter longer than this is cut (MLflow keeps up to 6,000)
RUN_KEY_TAG = "harness.run_key"  # what finds a run exported before (no duplicate on re-export)

# manifest keys logged as parameters as they are; `target`, `replay`, `machine` one level down
MANIFEST_PARAMS = (
    "scenario",
    "harness_version",
    "git_commit",
    "seed",
    "n_gpus",
    "simulated",
    "block_size",
    "trace_sha256",
    "clock",
    "endpoints",
)
NESTED_PARAMS = ("target", "replay", "machine")
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2el_s", "interactivity_tok_s")
QUANTILES = ("p50", "p90", "p95", "p99", "mean")
SCALARS = (
    "requests_total",
    "requests_ok",
    "requests_failed",
    "requests_cancelled",
    "interactivity_p90",
    "e2e_interactivity_p90",
    "tpgs",
    "cache_hit_rate",
    "ideal_cache_hit_rate",
)


def run_key(manifest: Mapping[str, Any], run_dir: Path) -> str:
    """The run's identity: its id and start (a gate's `a1` recurs in every gate folder)."""
    text = f"{manifest.get('run_id', run_dir.name)}@{manifest.get('started_at', '')}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def params(manifest: Mapping[str, Any]) -> dict[str, str]:
    out = {k: _text(manifest[k]) for k in MANIFEST_PARAMS if manifest.get(k) is not None}
    for section in NESTED_PARAMS:
        for k, v in (manifest.get(section) or {}).items():
            if v is not None:
                out[f"{section}.{k}"] = _text(v)
    return out


def _text(value: Any) -> str:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        text = ",".join(value)
    elif isinstance(value, dict | list | tuple):
        text = json.dumps(value, sort_keys=True)
    else:
        text = str(value)
    return text[:PARAM_CHARS]


def metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The headline: latency quantiles, interactivity, TPGS and its parts, throughput, goodput,
    the cache hit beside the ideal and the server's, each miss category's share of the prompt."""
    out: dict[str, Any] = {k: summary.get(k) for k in SCALARS}
    for name in LATENCIES:
        for q in QUANTILES:
            out[f"{name}.{q}"] = (summary.get(name) or {}).get(q)
    out |= _section(summary, "tpgs_parts", "tpgs")
    out |= _section(summary, "throughput", "throughput")
    goodput = summary.get("goodput") or {}
    out |= {
        f"goodput.{k}": goodput.get(k) for k in ("fraction", "requests_per_s", "sessions_per_s")
    }
    out["server_cache.hit_rate"] = (summary.get("server_cache") or {}).get("hit_rate")
    cache = summary.get("cache") or {}
    out |= _section(cache, "miss_share_of_prompt_tokens", "cache.miss_share")
    return {k: float(v) for k, v in out.items() if isinstance(v, int | float) and v == v}


def _section(summary: Mapping[str, Any], key: str, prefix: str) -> dict[str, Any]:
    return {f"{prefix}.{k}": v for k, v in (summary.get(key) or {}).items()}


def tags(manifest: Mapping[str, Any], summary: Mapping[str, Any], run_dir: Path) -> dict:
    validity = summary.get("validity") or {}
    out = {
        "harness.run_id": manifest.get("run_id", run_dir.name),
        RUN_KEY_TAG: run_key(manifest, run_dir),
        "harness.run_dir": str(run_dir.resolve()),
        "harness.status": manifest.get("status"),
        "harness.stopped_by": manifest.get("stopped_by"),
        "harness.valid": validity.get("valid"),
    }
    return {k: str(v) for k, v in out.items() if v is not None}


def verdict_tags(run_dir: Path, run_id: str, verdict_files: Iterable[Path]) -> dict[str, str]:
    """The verdict of a gate or a comparison that judged this run: the gate.json of the gate
    folder it is in, and any `harness compare --format json` output or gate.json given."""
    gate = run_dir.resolve().parent / "gate.json"
    files = [gate] if gate.is_file() else []
    out: dict[str, str] = {}
    for path in [*files, *verdict_files]:
        doc = read_optional_json(path) or {}
        role = _role(doc, run_dir, run_id, path.parent)
        if role is not None:
            out |= {
                "harness.verdict": str(doc.get("verdict")),
                "harness.verdict.by": "gate" if "gate_version" in doc else "compare",
                "harness.verdict.role": role,
                "harness.verdict.file": str(path.resolve()),
            }
    return out


def _role(doc: Mapping[str, Any], run_dir: Path, run_id: str, beside: Path) -> str | None:
    """How `doc` saw this run: baseline or candidate (None: it did not judge it). A gate names
    its runs by path, read as written (from where the gate ran) or beside its gate.json; a
    comparison names them by run id."""
    here = run_dir.resolve()

    def judged(names: Iterable[str]) -> bool:
        return any(
            name == run_id or here in (Path(name).resolve(), (beside / Path(name).name).resolve())
            for name in names
        )

    if "gate_version" in doc:
        for run in doc.get("runs") or []:
            if judged([run.get("path", "")]):
                return {"a": "baseline", "b": "candidate"}.get(run.get("arm"), str(run.get("arm")))
        return None
    for role, key in (("baseline", "baseline"), ("candidate", "run")):
        if judged(doc.get(key) or []):
            return role
    return None
