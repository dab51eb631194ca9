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
from harness.analysis.summary import Analysis

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
    traces = {str(t) for a in analyses if (t := a.run.manifest.get("trace_sha256"))}
    if len(traces) > 1:
        return f"different traces (trace_sha256 {', '.join(sorted(t[:12] for t in traces))})"
    loads = {_load(a) for a in analyses if a.run.manifest.get("replay")}  # imports have none
    if len(loads) > 1:
        return "different load: " + " vs ".join(_describe(load) for load in sorted(loads, key=str))
    return None


def _load(a: Analysis) -> tuple:
    replay = a.run.replay
    return tuple((k, getattr(replay, k)) for k in LOAD_SETTINGS)


def _describe(load: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in load if v is not None)
