"""`capacity.html`: the capacity search drawn, and why its first failing point failed.

One figure per SLO: each tried concurrency's figure with its bootstrap interval, the bound, the
points that missed in red. Below, the last point that met every SLO beside the first above it that
missed, on the figures that say where the time went: client queueing (send lag), prefill (TTFT and
the prompt tokens the server had to compute), decode (TPOT), eviction recompute (missed tokens the
server had and lost) and waiting on subagents (join wait). Every number is read from the points'
summary.json files.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from harness.report.html import CSS, _figure_html
from harness.report.plots.base import _figure
from harness.report.tables import table
from harness.report.text import fmt

CAPACITY_PAGE = "capacity.html"

# (label, how to read it from a summary)
WHY = (
    ("send lag p99 (s): queueing in the client", lambda s: s["client"]["send_lag_s"]["p99"]),
    ("TTFT p50 (s)", lambda s: s["ttft_s"]["p50"]),
    ("TTFT p90 (s)", lambda s: s["ttft_s"]["p90"]),
    ("uncached prompt tokens per request: prefill work", lambda s: _uncached(s)),
    ("TPOT p90 (s): decode", lambda s: s["tpot_s"]["p90"]),
    (
        "missed tokens the server had and lost: eviction",
        lambda s: s["cache"]["miss_tokens"].get("evicted"),
    ),
    ("join wait mean (s): waiting on subagents", lambda s: s["sessions"]["join_wait_s"]["mean"]),
    ("cache hit rate (server)", lambda s: s["cache_hit_rate"]),
)


def _uncached(s: dict) -> float | None:
    requests = s["cache"].get("requests") or 0
    missed = sum(v for k, v in s["cache"]["miss_tokens"].items() if k != "unreported")
    return missed / requests if requests else None


def write_capacity_report(result: dict, out: Path) -> Path:
    points = result["points"]
    body = [
        f"<h1>Capacity: {result['capacity']} concurrent tasks</h1>",
        f'<p class="note">The most concurrent tasks for which every SLO ({html.escape(_slos(result))})'
        " held, judged by each figure's 95 % bootstrap interval over tasks (harness capacity).</p>",
        *(_slo_figure(name, points) for name in result["slos"]),
        _why(points),
    ]
    page = out / CAPACITY_PAGE
    page.write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>capacity</title>'
        f"<style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n",
        encoding="utf-8",
    )
    return page


def _slos(result: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in result["slos"].items())


def _slo_figure(name: str, points: list[dict]) -> str:
    fig, ax = _figure(f"{name} by concurrency (bar: 95 % interval; red: missed)")
    for p in points:
        f = p["slos"][name]
        if f["value"] is None:
            continue
        lo, hi = f["interval"] or (f["value"], f["value"])
        color = "tab:blue" if p["met"] else "tab:red"
        ax.errorbar(
            p["concurrency"],
            f["value"],
            [[f["value"] - lo], [hi - f["value"]]],
            fmt="o",
            color=color,
        )
    bound = points[0]["slos"][name]["bound"] if points else None
    if bound is not None:
        ax.axhline(bound, color="grey", linestyle="--", label=f"bound {bound:g}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent tasks (load.concurrency)")
    return _figure_html(name, fig)


def _why(points: list[dict]) -> str:
    met = [p for p in points if p["met"]]
    missed = [
        p for p in points if not p["met"] and (not met or p["concurrency"] > met[-1]["concurrency"])
    ]
    if not met or not missed:
        return '<p class="note">No met point with a missed one above it: nothing to set side by side.</p>'
    last, first = (
        max(met, key=lambda p: p["concurrency"]),
        min(missed, key=lambda p: p["concurrency"]),
    )
    sides = [(p["concurrency"], _summary(p)) for p in (last, first)]
    rows = [[label, *(fmt(_read(get, s)) for _, s in sides)] for label, get in WHY]
    header = [
        "where the time went",
        *(
            f"{c} tasks ({'met' if p['met'] else 'missed'})"
            for (c, _), p in zip(sides, (last, first), strict=True)
        ),
    ]
    return "<h2>Why the first failing point failed</h2>" + table(header, rows)


def _column(point: dict) -> str:
    runs = len(point["runs"])
    first = f"; its first of {runs} runs" if runs > 1 else ""
    return f"{point['concurrency']} tasks ({'met' if point['met'] else 'missed'}{first})"


def _summary(point: dict) -> dict:
    return json.loads((Path(point["runs"][0]) / "summary.json").read_text(encoding="utf-8"))


def _read(get, summary: dict):
    try:
        return get(summary)
    except (KeyError, TypeError):
        return None
