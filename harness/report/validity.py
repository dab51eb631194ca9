"""Whether a run's figures can be trusted, shown where a reader looks first: the report's banner
and the terminal summary's first lines. Today one reason makes a run invalid: more than 1 % of its
measured requests overflowed the server's context (summary.json `validity`, `context_limit`;
docs/metrics.md, "Context limits"). Presents only; the verdict is the analyzer's."""

from __future__ import annotations

from markupsafe import Markup

from harness.analysis.context_limit import invalid_reasons
from harness.analysis.summary_types import Analysis, Summary
from harness.report.jinja import template_module


def invalid_banner(analyses: list[Analysis]) -> list[Markup]:
    """One red banner per invalid run (none for a valid one)."""
    banner = template_module("notes.html").invalid
    return [
        banner(a.run.name, reasons) for a in analyses if (reasons := invalid_reasons(a.summary))
    ]


BANNER_CSS = (
    ".invalid{background:#fde8e8;border:2px solid #b00;padding:.5rem 1rem;border-radius:4px;"
    "color:#700}"
)


def context_lines(summary: Summary) -> list[str]:
    """The terminal summary's lines: INVALID first when it is, then what overflowed, if any."""
    out = [f"INVALID RUN: {r}" for r in invalid_reasons(summary)]
    c = summary.get("context_limit") or {}
    if c.get("overflow"):
        out.append(
            f"context overflow         {c['overflow']} of {c['requests']} measured requests"
            f" (policy {c['policy'] or 'send'}: {c['refused']} refused by the server,"
            f" {c['skipped']} skipped, {c['trimmed']} trimmed)"
        )
    return out
