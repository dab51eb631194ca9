"""Like with like: which figures two sides of a comparison measure alike, and why not where not.

Two runs are compared on a figure only when they replayed the same trace (`trace_sha256`) under
the same load (the manifest's `replay` load settings) and both define the figure as we do. The
server, its options and the endpoint may differ: that is what a comparison is for. A run imported
from another tool (`harness import`) keeps the figures that tool measures as we do (TTFT, E2EL,
throughput, failures, cache hits where its server reported them); TPOT, ITL and the
interactivities derived from them are another quantity there (AIPerf's ITL is the gap between
chunks, and its TPOT reads 0 when all tokens arrive in one read), so they get no verdict.
"""

from __future__ import annotations

from harness.analysis.compare.sides import HEADLINE
from harness.analysis.summary_types import Analysis

# The manifest `replay` settings that change what load a run put on its server.
LOAD_SETTINGS = ("load", "concurrency", "session_rate", "arrival", "time_scale", "history")
# Figures another tool defines otherwise than we do (docs/metrics.md, "The same figures").
DEFINED_OTHERWISE = (
    "tpot_p50",
    "tpot_p90",
    "tpot_p99",
    "itl_p90",
    "interactivity_p90",
    "e2e_interactivity_p90",
)


def not_comparable(baseline: list[Analysis], run: list[Analysis]) -> dict[str, str]:
    """Figure key -> why the two sides are not comparable on it; "*" applies to every figure."""
    keys = [m.key for m in HEADLINE]
    whole = _whole_run_reason([*baseline, *run])
    if whole is not None:
        return dict.fromkeys(keys, whole)
    tools = sorted({t for a in [*baseline, *run] if (t := _tool(a)) is not None})
    ours = any(_tool(a) is None for a in [*baseline, *run])
    mixed = len(tools) > 1 or (bool(tools) and ours)
    if not mixed:
        return {}
    why = f"{' and '.join(tools)} defines it otherwise (chunk gaps, not per-token times)"
    return dict.fromkeys(DEFINED_OTHERWISE, why)


def _tool(a: Analysis) -> str | None:
    imported = a.run.manifest.get("imported")
    return imported.get("tool") if isinstance(imported, dict) else None


def _whole_run_reason(analyses: list[Analysis]) -> str | None:
    traces = [trace_identity(a) for a in analyses]
    if any(t is None for t in traces) and any(_tool(a) for a in analyses):
        return "trace unknown (" + _unknown_names(analyses, traces) + " states no trace)"
    known = {t for t in traces if t is not None and t[1]}
    if len({kind for kind, _ in known}) > 1:
        return "trace unknown (an import names its input file; a native run hashes its trace)"
    if len(known) > 1:
        return "different traces (" + ", ".join(sorted(v[:12] for _, v in known)) + ")"
    loads = [_load(a) for a in analyses]
    if any(load is None for load in loads) and any(_tool(a) for a in analyses):
        return "load unknown (" + _unknown_names(analyses, loads) + " states no load)"
    stated = {load for load in loads if load}
    if len(stated) > 1:
        return "different load: " + " vs ".join(_describe(load) for load in sorted(stated, key=str))
    return None


def trace_identity(a: Analysis) -> tuple[str, str] | None:
    """("sha256", digest) of a native run's trace; ("file", name) an importer stated; else None.
    A native run with no trace hash (a hand-made fixture) is not judged on its trace."""
    stated = (a.run.manifest.get("imported") or {}).get("settings", {}).get("trace")
    if _tool(a):
        return ("file", str(stated)) if stated else None
    sha = a.run.manifest.get("trace_sha256")
    return ("sha256", str(sha)) if sha else ("sha256", "")  # "": unhashed, alike to all


def _unknown_names(analyses: list[Analysis], values: list) -> str:
    return ", ".join(
        f"{a.run.name} ({_tool(a) or 'native'})"
        for a, v in zip(analyses, values, strict=True)
        if v is None
    )


def _load(a: Analysis) -> tuple | None:
    """The load a run put on its server; an import's is what its importer stated, or None."""
    if _tool(a):
        stated = (a.run.manifest.get("imported") or {}).get("settings", {}).get("load")
        return tuple(sorted(stated.items())) if isinstance(stated, dict) else None
    if not a.run.manifest.get("replay"):
        return ()  # a hand-made fixture: no load settings, alike to all
    replay = a.run.replay
    return tuple((k, getattr(replay, k)) for k in LOAD_SETTINGS)


def _describe(load: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in load if v is not None)
