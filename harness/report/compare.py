"""`harness compare` output: a terminal table, Markdown for CI comments, JSON for machines."""

from __future__ import annotations

import json

from harness.analysis.compare.changes import MetricChange
from harness.analysis.compare.notes import interval_text
from harness.analysis.compare.verdict import Judgement
from harness.report.numbers import fmt

HEADER = ("metric", "baseline", "run", "change", "interval", "band (source)", "verdict")

__all__ = ["HEADER", "cells", "interval_text", "render", "verdict_line"]


def _cells(row: MetricChange, shared: str | None) -> tuple[str, ...]:
    change = "n/a" if row.change is None else f"{row.change * 100:+.1f}%"
    if row.why_not:
        verdict = "not comparable" if row.why_not == shared else f"not comparable: {row.why_not}"
        return (row.label, fmt(row.baseline), fmt(row.run), change, "", "", verdict)
    verdict = str(row.verdict) + ("" if row.direction == "~" else f" ({row.direction})")
    if not row.gated:
        verdict += " [not gated]"
    return (
        row.label, fmt(row.baseline), fmt(row.run), change, interval_text(row), _band(row), verdict
    )  # fmt: skip


def cells(result: Judgement) -> list[tuple[str, ...]]:
    """Each row's cells as the terminal prints them (under `HEADER`): a notebook's table."""
    return [_cells(r, result.shared_why_not) for r in result.rows]


def _band(row: MetricChange) -> str:
    if row.band is None:
        return row.band_source or ""
    return f"±{row.band * 100:.2g}% ({row.band_source})"


def _preamble(result: Judgement) -> list[str]:
    b, r = result.counts["baseline"], result.counts["run"]
    level = f"{100 * (1 - result.alpha):g}%"
    over = (
        f"Student t over {len(result.run)} interleaved pairs (each pair's difference one sample;"
        " band = one run's SD, the differences' / sqrt 2)"
        if result.paired
        else "Student t over nights (each night's mean one sample; band = one night's SD between"
        " nights)"
        if result.by_night
        else "Student t over runs (each run's figure one sample; band = one run's SD between runs)"
    )
    return [
        f"baseline: {', '.join(result.baseline)} ({b['ok']} ok requests, {b['failed']} failed)",
        f"run:      {', '.join(result.run)} ({r['ok']} ok requests, {r['failed']} failed)",
        f"history:  {', '.join(result.history) or 'none used'}",
        f"interval: {level} {over}; the within-run bootstrap only widens it. regressed: the interval is"
        " wholly worse and the change passes its threshold; no change detected: the interval"
        " rules out the threshold; else inconclusive",
        *result.notes,
    ]


def verdict_line(result: Judgement) -> str:
    """The overall verdict in one line, with what to do about it."""
    gate = ", ".join(result.thresholds) or f"every row at {result.min_change * 100:g}%"
    if result.verdict == "regressed":
        return f"REGRESSED ({gate}): " + "; ".join(result.failures)
    if result.verdict == "not comparable":
        return (
            f"NOT COMPARABLE ({gate}): {result.why_not_comparable}; nothing was judged on what "
            "differs (rerun the same trace and load, or --fail-on only rows both sides measure alike)"
        )
    if result.verdict == "inconclusive" and result.why_inconclusive:
        return f"INCONCLUSIVE ({gate}): {result.why_inconclusive}"
    if result.verdict == "inconclusive":
        more = (
            f"about {result.runs_needed} more run(s) a side would likely decide it"
            if result.runs_needed
            else f"about {result.nights_needed} more night(s) would likely decide it"
            if result.nights_needed
            else "more runs than is practical would be needed at this spread"
        )
        return f"INCONCLUSIVE ({gate}): {more}"
    seen = ", ".join(f"{k} {v * 100:.1f}%" for k, v in result.smallest_detectable.items())
    return f"NO CHANGE DETECTED ({gate})" + (
        f"; smallest change this could see: {seen}" if seen else ""
    )


def render_table(result: Judgement) -> str:
    rows = [HEADER, *cells(result)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = _preamble(result) + [""]
    for n, row in enumerate(rows):
        padded = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:-2], widths[1:-2], strict=True)
        ]
        lines.append("  ".join([*padded, row[-2].ljust(widths[-2]), row[-1]]).rstrip())
        if n == 0:
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
    return "\n".join([*lines, "", verdict_line(result)]).rstrip()


def render_markdown(result: Judgement) -> str:
    lines = [f"- {line}" for line in _preamble(result)] + [""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|---|" + "---:|" * 4 + "---|:---:|")
    for row in result.rows:
        cells = _cells(row, result.shared_why_not)
        verdict = f"**{cells[-1]}**" if cells[-1].startswith("regressed") else cells[-1]
        lines.append("| " + " | ".join((*cells[:-1], verdict)) + " |")
    return "\n".join([*lines, "", f"**{verdict_line(result)}**"])


def render_json(result: Judgement) -> str:
    return json.dumps(result.to_json(), indent=2)


def render(result: Judgement, fmt: str = "table") -> str:
    return {"table": render_table, "markdown": render_markdown, "json": render_json}[fmt](result)
