"""What a run was, in the scenario file's words: its workload, its load and its target, and what
differs between two runs, the reference (the baseline) first.

A comparison, a history screen and a trend's series all ask the same question of two runs: did
they replay the same trace under the same load against the same target configuration? This is
where each side is read (the manifest's `replay` section and `target`, the run's own
`scenario.yaml`) and where a difference is put in words a user can look up in a scenario file:
`load.concurrency 6 vs 3`, never `concurrency=3, arrival=poisson` for a closed loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.analysis.summary_types import Analysis

# The manifest `replay` names of the settings that change the load a run put on its server, in
# the scenario's words; which of them a load mode reads (the others are inert under it).
LOAD_WORDS = {
    "load": "load.mode",
    "concurrency": "load.concurrency",
    "session_rate": "load.session_rate",
    "arrival": "load.arrival",
    "time_scale": "load.time_scale",
    "think_cap_s": "load.think_cap_s",
    "history": "load.history",
}
BY_MODE = {
    "closed": ("concurrency",),
    "open": ("session_rate", "arrival"),
    "timestamps": ("time_scale",),
}
ANY_MODE = ("think_cap_s", "history")
# Target keys that differ from run to run without being configuration (ports, pids, addresses).
_VOLATILE = ("url", "port", "pid", "address", "host", "endpoint")
# Workload keys that name a run, not what it replays (a fresh salt per run changes no token count).
_WORKLOAD_INERT = ("salt",)
SHOWN = 4  # differing fields named before "and N more"


def tool(a: Analysis) -> str | None:
    """The tool an imported run came from (`harness import`), else None."""
    imported = a.run.manifest.get("imported")
    return imported.get("tool") if isinstance(imported, dict) else None


def load_settings(a: Analysis) -> dict[str, Any] | None:
    """The load, as `load.<field>: value` for the fields its mode reads. An import's is what its
    importer stated (None: it stated none); a native run without a `replay` section (a hand-made
    fixture) states nothing and is alike to all ({})."""
    if tool(a):
        stated = (a.run.manifest.get("imported") or {}).get("settings", {}).get("load")
        return {f"load.{k}": v for k, v in stated.items()} if isinstance(stated, dict) else None
    replay = a.run.manifest.get("replay")
    if not isinstance(replay, dict):
        return {}
    mode = replay.get("load", "closed")
    names = ("load", *BY_MODE.get(mode, ()), *ANY_MODE)
    return {LOAD_WORDS[k]: replay.get(k) for k in names}


def workload_settings(a: Analysis) -> dict[str, Any]:
    """The run's `workload:` section flattened (`workload.seed`, `workload.overrides.x`), from its
    scenario.yaml; {} when the folder has none."""
    workload = (a.run.scenario or {}).get("workload")
    flat = flatten(workload, "workload") if isinstance(workload, Mapping) else {}
    return {k: v for k, v in flat.items() if k.rsplit(".", 1)[-1] not in _WORKLOAD_INERT}


def target_config(a: Analysis) -> dict[str, Any]:
    """The manifest's target flattened in the scenario's words (`target.engine.options.x` for
    the engine's options), less what changes from run to run (ports, pids, URLs)."""
    flat = flatten(a.run.manifest.get("target") or {}, "target")
    return {
        _engine_words(k): v
        for k, v in flat.items()
        if not any(word in k.rsplit(".", 1)[-1] for word in _VOLATILE)
    }


def _engine_words(key: str) -> str:
    """The manifest's resolved engine configuration is the scenario's `target.engine.options`."""
    head = "target.engine."
    return "target.engine.options." + key[len(head) :] if key.startswith(head) else key


def flatten(value: Any, prefix: str) -> dict[str, Any]:
    """Nested mappings and lists as dotted keys (`a.b.0.c`), under `prefix` when given."""
    dot = f"{prefix}." if prefix else ""
    if isinstance(value, Mapping):
        items = [(f"{dot}{k}", v) for k, v in value.items()]
    elif isinstance(value, list) and any(isinstance(v, Mapping | list) for v in value):
        items = [(f"{dot}{i}", v) for i, v in enumerate(value)]
    else:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, v in items:
        out.update(flatten(v, key))
    return out


def differences(reference: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """The fields that differ, `field reference vs other`, the reference's value first; "" when
    none. A field only one side has reads `unset` on the other."""
    union = [*reference, *(k for k in other if k not in reference)]  # the file's own order
    keys = [k for k in union if reference.get(k, _UNSET) != other.get(k, _UNSET)]
    shown = ", ".join(
        f"{k} {_word(reference.get(k, _UNSET))} vs {_word(other.get(k, _UNSET))}"
        for k in keys[:SHOWN]
    )
    return shown + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")


_UNSET = object()


def _word(value: Any) -> str:
    if value is _UNSET:
        return "unset"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
