"""Like with like: which figures two sides of a comparison measure alike, and why not where not.

Two runs are compared on a figure only when they replayed the same trace (`trace_sha256`) under
the same load (the manifest's `replay` load settings) and both define the figure as we do; a
reason names the baseline first, then the run, and only the fields that differ, in the scenario
file's words (`settings.py`). The
server, its options and the endpoint may differ: that is what a comparison is for. A run imported
from another tool (`harness import`) keeps the figures that tool measures as we do (TTFT, E2EL,
throughput, failures, cache hits where its server reported them); TPOT, ITL and the
interactivities derived from them are another quantity there (AIPerf's ITL is the gap between
chunks, and its TPOT reads 0 when all tokens arrive in one read), so they get no verdict.
"""

from __future__ import annotations

from harness.analysis.compare.settings import (
    differences,
    load_settings,
    tool,
    workload_settings,
)
from harness.analysis.compare.sides import HEADLINE
from harness.analysis.summary_types import Analysis

# Figures another tool defines otherwise than we do (docs/metrics.md, "The same names in other tools").
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
    whole = pair_reason(baseline, run)
    if whole is not None:
        return dict.fromkeys(keys, whole)
    tools = sorted({t for a in [*baseline, *run] if (t := tool(a)) is not None})
    ours = any(tool(a) is None for a in [*baseline, *run])
    mixed = len(tools) > 1 or (bool(tools) and ours)
    if not mixed:
        return {}
    why = f"{' and '.join(tools)} defines it otherwise (chunk gaps, not per-token times)"
    return dict.fromkeys(DEFINED_OTHERWISE, why)


def pair_reason(baseline: list[Analysis], run: list[Analysis]) -> str | None:
    """Why no figure of the two sides can be compared (another trace or load, or one unknown),
    naming the baseline first, then the run, and only the fields that differ; None: alike."""
    everyone = [("baseline", a) for a in baseline] + [("run", a) for a in run]
    several = len(baseline) > 1 or len(run) > 1
    for side, a in everyone[1:]:
        ref_side, ref = everyone[0]
        who = (
            f"{ref_side} {ref.run.name} vs {side} {a.run.name}"
            if several or side == ref_side
            else f"{ref_side} vs {side}"
        )
        why = _trace_reason(ref, a, who) or _load_reason(ref, a, who)
        if why is not None:
            return why
    return None


def _trace_reason(ref: Analysis, a: Analysis, who: str) -> str | None:
    t_ref, t_a = trace_identity(ref), trace_identity(a)
    if t_ref is None or t_a is None:
        return f"trace unknown ({_unknown(ref if t_ref is None else a)} states no trace)"
    if t_ref[1] and t_a[1] and t_ref[0] != t_a[0]:
        return "trace unknown (an import names its input file; a native run hashes its trace)"
    if t_ref[1] and t_a[1] and t_ref != t_a:
        named = differences(workload_settings(ref), workload_settings(a))
        if not named:
            label = "trace.jsonl sha256" if t_ref[0] == "sha256" else "trace file"
            named = f"{label} {t_ref[1][:12]} vs {t_a[1][:12]}"
        return f"different trace, {who}: {named}"
    return None


def _load_reason(ref: Analysis, a: Analysis, who: str) -> str | None:
    l_ref, l_a = load_settings(ref), load_settings(a)
    if l_ref is None or l_a is None:
        return f"load unknown ({_unknown(ref if l_ref is None else a)} states no load)"
    if not l_ref or not l_a:
        return None  # a hand-made fixture states no load: alike to all
    if bool(tool(ref)) != bool(tool(a)):  # an import against a native run: what it states
        stated = l_ref if tool(ref) else l_a
        l_ref = {k: l_ref.get(k) for k in stated}
        l_a = {k: l_a.get(k) for k in stated}
    named = differences(l_ref, l_a)
    return f"different load, {who}: {named}" if named else None


def trace_identity(a: Analysis) -> tuple[str, str] | None:
    """("sha256", digest) of a native run's trace; ("file", name) an importer stated; else None.
    A native run with no trace hash (a hand-made fixture) is not judged on its trace."""
    stated = (a.run.manifest.get("imported") or {}).get("settings", {}).get("trace")
    if tool(a):
        return ("file", str(stated)) if stated else None
    sha = a.run.manifest.get("trace_sha256")
    return ("sha256", str(sha)) if sha else ("sha256", "")  # "": unhashed, alike to all


def _unknown(a: Analysis) -> str:
    return f"{a.run.name} ({tool(a) or 'native'})"
