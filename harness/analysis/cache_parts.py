"""summary.json `cache.by_segment` and `cache.by_call_kind`: where in the prompt, and at which
kind of call, the server's cache held beside the ideal (analysis.prompt_segments, call_kinds)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis import call_kinds, prompt_segments
from harness.analysis.cache import CATEGORIES, breakdown
from harness.analysis.metrics import percentiles
from harness.analysis.sessions.graph import TaskGraph


@dataclass(frozen=True)
class CacheParts:
    kinds: pd.Series  # per ok record: its call kind
    modes: pd.Series  # per ok record: fork / spawn for a subagent (trace), else None
    spans: prompt_segments.SegmentSpans | None  # None without a matching trace
    summary: dict  # by_segment, by_call_kind, segments, call_kinds


def cache_parts(
    run, ok: pd.DataFrame, misses: pd.DataFrame, graph: TaskGraph, ttft: pd.Series, exact: bool
) -> CacheParts:
    """`exact`: the ideal was walked from a matching trace (else the segments are unknown)."""
    kinds = call_kinds.call_kinds(ok, graph)
    modes = call_kinds.subagent_modes(ok, run.trace)
    spans = prompt_segments.segment_spans(run.trace, ok, run.replay.salt) if exact else None
    why = None if exact else "no matching trace: the prompts' segments are unknown"
    codes = pd.Categorical(kinds, categories=call_kinds.CALL_KINDS).codes
    per_kind = prompt_segments.by_segment(spans, misses, codes) if spans is not None else {}
    summary = {
        "by_segment": prompt_segments.by_segment(spans, misses) if spans is not None else {},
        "segments": prompt_segments.segment_info(spans, why),
        "by_call_kind": _by_call_kind(ok, misses, kinds, modes, ttft, per_kind),
        "call_kinds": {
            "kinds": list(call_kinds.CALL_KINDS),
            "long_think_s": call_kinds.LONG_THINK_S,
        },
    }
    return CacheParts(kinds, modes, spans, summary)


def _by_call_kind(ok, misses, kinds, modes, ttft, per_kind: dict) -> dict:
    table = breakdown(ok, misses, kinds)
    out = {}
    for i, kind in enumerate(call_kinds.CALL_KINDS):
        if kind not in table.index:
            continue
        mask = (kinds == kind).to_numpy()
        out[kind] = {
            **_rates(table.loc[kind]),
            "ttft_s": _ttft(ttft, ok.index[mask]),
            "by_segment": per_kind.get(i, {}),
        }
        if kind == "subagent_first":
            out[kind]["modes"] = _modes(ok, misses, modes[mask], ttft)
    return out


def _modes(ok, misses, modes: pd.Series, ttft) -> dict:
    known = modes.dropna()
    if known.empty:
        return {}
    table = breakdown(ok.loc[known.index], misses.loc[known.index], known)
    return {
        str(m): {**_rates(table.loc[m]), "ttft_s": _ttft(ttft, known.index[known == m])}
        for m in table.index
    }


def _rates(row: pd.Series) -> dict:
    return {
        "requests": int(row["requests"]),
        "reported": int(row["reported"]),
        "prompt_tokens": float(row["prompt_tokens"]),
        "hit_rate": None if np.isnan(row["hit_rate"]) else float(row["hit_rate"]),
        "ideal_hit_rate": None if np.isnan(row["ideal_hit_rate"]) else float(row["ideal_hit_rate"]),
        "miss_tokens": {c: float(row[f"miss_{c}"]) for c in CATEGORIES if row[f"miss_{c}"] > 0},
    }


def _ttft(ttft: pd.Series, index) -> dict:
    p = percentiles(ttft.reindex(index).to_numpy(dtype=float))
    return {"p50": p["p50"], "p90": p["p90"], "count": p["count"]}
