"""`harness compare` output: a terminal table, Markdown for CI comments, JSON for machines."""

from __future__ import annotations

import json

from harness.analysis.compare.changes import CompareResult, MetricChange
from harness.report.text import fmt

HEADER = ("metric", "baseline", "run", "change", "interval", "verdict")


def _cells(row: MetricChange) -> tuple[str, ...]:
    change = "n/a" if row.change is None else f"{row.change * 100:+.1f}%"
    verdict = f"not comparable: {row.why_not}" if row.why_not else row.verdict
    return (row.label, fmt(row.baseline), fmt(row.run), change, interval_text(row), verdict)


def interval_text(row: MetricChange) -> str:
    """The interval of the change: relative where the baseline is not zero, else absolute."""
    if row.interval is not None:
        return f"[{row.interval[0] * 100:+.1f}%, {row.interval[1] * 100:+.1f}%]"
    if row.interval_abs is not None:
        return f"[{row.interval_abs[0]:+.3g}, {row.interval_abs[1]:+.3g}]"
    return "n/a"


def _preamble(result: CompareResult) -> list[str]:
    b, r = result.counts["baseline"], result.counts["run"]
    return [
        f"baseline: {', '.join(result.baseline)} ({b['ok']} ok requests, {b['failed']} failed)",
        f"run:      {', '.join(result.run)} ({r['ok']} ok requests, {r['failed']} failed)",
        f"interval: {100 * (1 - result.alpha):g}% bootstrap over tasks (time blocks for rates), repeats"
        f" drawn too; significant: the interval excludes 0 and |change| >= {result.min_change * 100:g}%;"
        " '~' = within noise; a threshold fails only on a significant change past it",
        *result.notes,
    ]


def _verdict_line(result: CompareResult) -> list[str]:
    if not result.thresholds:
        return []
    if result.failures:
        return ["FAIL: " + "; ".join(result.failures)]
    return [f"PASS: no significant change crosses {', '.join(result.thresholds)}"]


def render_table(result: CompareResult) -> str:
    rows = [HEADER, *(_cells(r) for r in result.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = _preamble(result) + [""]
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:-1], widths[1:-1], strict=True)
        ]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
        if n == 0:
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
    return "\n".join(lines + [""] + _verdict_line(result)).rstrip()


def render_markdown(result: CompareResult) -> str:
    lines = [f"- {line}" for line in _preamble(result)] + [""]
    lines.append("| " + " | ".join(HEADER[:-1] + ("significant",)) + " |")
    lines.append("|---|" + "---:|" * 4 + ":---:|")
    for row in result.rows:
        cells = _cells(row)
        verdict = "~" if cells[-1] == "~" else f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells[:-1] + (verdict,)) + " |")
    summary = _verdict_line(result)
    return "\n".join(lines + ([""] + [f"**{summary[0]}**"] if summary else []))


def render_json(result: CompareResult) -> str:
    return json.dumps(result.to_dict(), indent=2)


def render(result: CompareResult, fmt: str = "table") -> str:
    return {"table": render_table, "markdown": render_markdown, "json": render_json}[fmt](result)
