"""Speculative decoding, shown: a small table of each run's acceptance rate, mean accepted length
and acceptance by draft position (summary.json `speculative_decoding`, from the server's
/metrics; docs/metrics.md, "Speculative decoding"), and its line in the terminal summary.
A run whose server exported no spec-decode figures shows nothing. Presents only."""

from __future__ import annotations

from markupsafe import Markup

from harness.analysis.summary_types import Analysis, Summary
from harness.report.jinja import render
from harness.report.numbers import fmt


def spec_table(analyses: list[Analysis]) -> Markup | str:
    """The table (a tile of its own, to place where the page wants it); "" when no run has one."""
    rows = [(a.run.name, spec) for a in analyses if (spec := a.summary.get("speculative_decoding"))]
    if not rows:
        return ""
    width = max(len(s.get("acceptance_by_position") or []) for _, s in rows)
    cells = [(name, _cells(spec, width)) for name, spec in rows]
    return render("spec.html", width=width, rows=cells)


def _cells(spec: dict, width: int) -> list[str]:
    gauge = spec.get("source") == "sglang gauges"
    rate = spec.get("acceptance_rate", spec.get("last_batch_accept_rate"))
    length = spec.get("mean_accepted_length", spec.get("last_batch_accept_length"))
    by_pos = list(spec.get("acceptance_by_position") or [])
    return [
        f"{fmt(rate, '.3f')}{' (last batch)' if gauge else ''}",
        fmt(length, ".3f"),
        *(fmt(spec.get(k), ".0f") for k in ("drafts", "draft_tokens", "accepted_tokens")),
        *(fmt(v, ".3f") for v in by_pos + [None] * (width - len(by_pos))),
        _per_request_cell(spec.get("per_request")),
    ]


def _per_request_cell(per: dict | None) -> str:
    if not per:
        return fmt(None, ".3f")
    each = per["request_acceptance"]
    return f"{fmt(each['p50'], '.3f')} / {fmt(each['p90'], '.3f')} ({each['count']})"


def spec_lines(summary: Summary) -> list[str]:
    spec = summary.get("speculative_decoding")
    if not spec:
        return []
    return [*_server_lines(spec), *_per_request_lines(spec.get("per_request"))]


def _per_request_lines(per: dict | None) -> list[str]:
    if not per:
        return []
    each = per["request_acceptance"]
    return [
        f"  per request ({per['requests_reporting']} reporting)"
        f"  acceptance {fmt(per['acceptance_rate'], '.3f')}"
        f" ({per['accepted_tokens']} of {per['draft_tokens']} drafted tokens),"
        f" each request's p50 {fmt(each['p50'], '.3f')} p90 {fmt(each['p90'], '.3f')}"
        f" (n={each['count']})"
    ]


def _server_lines(spec: dict) -> list[str]:
    if spec.get("source") == "per-request usage":
        return ["speculative decoding     no /metrics counters scraped"]
    if spec.get("source") == "sglang gauges":
        return [
            f"speculative decoding     last batch: acceptance {fmt(spec['last_batch_accept_rate'], '.3f')},"
            f" accepted length {fmt(spec['last_batch_accept_length'], '.3f')} (SGLang gauges)"
        ]
    by_pos = ", ".join(fmt(v, ".2f") for v in spec.get("acceptance_by_position") or [])
    return [
        f"speculative decoding     acceptance {fmt(spec['acceptance_rate'], '.3f')}"
        f" ({spec['accepted_tokens']:.0f} of {spec['draft_tokens']:.0f} drafted tokens),"
        f" mean accepted length {fmt(spec['mean_accepted_length'], '.3f')}"
        + (f", by position {by_pos}" if by_pos else "")
    ]
