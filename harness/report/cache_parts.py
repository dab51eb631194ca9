"""The cache by prompt segment and by call kind, as text and HTML tables (summary.json
`cache.by_segment`, `cache.by_call_kind`; they are computed in analysis.cache_parts)."""

from __future__ import annotations

from markupsafe import Markup

from harness.analysis.summary_types import CacheSummary
from harness.report.jinja import join, table, template_module
from harness.report.numbers import fmt, human

SEGMENT_LABELS = {
    "system": "system prompt",
    "inherited": "inherited (fork)",
    "history": "earlier turns",
    "previous_output": "previous reply",
    "reports": "subagent reports",
    "tool_result": "tool result",
    "new_input": "new input",
}
CALL_LABELS = {
    "session_first": "session first call",
    "subagent_first": "subagent first call",
    "after_join": "after a join",
    "after_long_think": "after a long think",
    "steady": "steady turn",
}


def segment_rows(cache: CacheSummary) -> list[list[str]]:
    rows = []
    total = sum(v["prompt_tokens"] for v in (cache.get("by_segment") or {}).values()) or 1.0
    for kind, v in (cache.get("by_segment") or {}).items():
        rows.append(
            [
                SEGMENT_LABELS.get(kind, kind),
                str(v["requests"]),
                human(v["prompt_tokens"]),
                fmt(v["prompt_tokens"] / total, ".1%"),
                fmt(v["hit_rate"], ".3f"),
                fmt(v["ideal_hit_rate"], ".3f"),
            ]
        )
    return rows


def call_rows(cache: CacheSummary) -> list[list[str]]:
    rows = []
    for kind, v in (cache.get("by_call_kind") or {}).items():
        rows.append(_call_row(CALL_LABELS.get(kind, kind), v))
        for mode, m in (v.get("modes") or {}).items():
            rows.append(_call_row(f"  {mode}ed", m))
    return rows


def _call_row(name: str, v: dict) -> list[str]:
    misses = v.get("miss_tokens") or {}
    top = max(misses, key=lambda k: misses[k]) if misses else None
    return [
        name,
        str(v["requests"]),
        fmt(v["hit_rate"], ".3f"),
        fmt(v["ideal_hit_rate"], ".3f"),
        fmt(v["ttft_s"]["p50"], ".3g"),
        f"{top} {human(misses[top])}" if top else "-",
    ]


SEGMENT_HEADER = ["segment", "requests", "prompt tokens", "share", "hit rate", "ideal"]
CALL_HEADER = ["call kind", "requests", "hit rate", "ideal", "TTFT p50 s", "most missed"]


def text_lines(cache: CacheSummary) -> list[str]:
    """The terminal's two small tables (none when the run has neither)."""
    out = []
    info = cache.get("segments") or {}
    if cache.get("by_segment"):
        note = (
            " (positions scaled to the server's count)" if info.get("positions") == "scaled" else ""
        )
        out += [f"cache by prompt segment{note}", *_text_table(SEGMENT_HEADER, segment_rows(cache))]
    elif info.get("note"):
        out.append(f"cache by prompt segment  unknown: {info['note']}")
    if cache.get("by_call_kind"):
        long_s = (cache.get("call_kinds") or {}).get("long_think_s")
        out += [
            f"cache by call kind (a long think: idle > {fmt(long_s, 'g')} s)",
            *_text_table(CALL_HEADER, call_rows(cache)),
        ]
    return out


def _text_table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join
    return [
        "  "
        + line(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]


def html_tables(runs: list[tuple[str, CacheSummary]]) -> Markup:
    """One segment table and one call-kind table per run."""
    out = []
    for name, cache in runs:
        info = cache.get("segments") or {}
        caption = name
        if cache.get("by_segment"):
            note = (
                f"{caption}: prompt tokens by the part of the prompt they are; hit rate over the"
                " requests whose server reported cached tokens."
                + (f" {info['note']}." if info.get("note") else "")
            )
            out.append(table(SEGMENT_HEADER, segment_rows(cache), note))
        elif info.get("note"):
            out.append(template_module("cache.html").segments_unknown(name, info["note"]))
        if cache.get("by_call_kind"):
            long_s = (cache.get("call_kinds") or {}).get("long_think_s")
            note = (
                f"{caption}: a call's kind by where it sits in its task (docs/metrics.md); a long"
                f" think is an idle gap over {fmt(long_s, 'g')} s; most missed: the largest miss"
                " category, in tokens."
            )
            out.append(table(CALL_HEADER, call_rows(cache), note))
    return join(out)
