"""`capacity.html`: the capacity search drawn, and why its first failing point failed.

First the answer in words: the band with each point's share of met runs, the SLO that binds at
the first failing point, what to read it with (non-monotone points, busy hosts, the budget). Then
every point tried: its state, each SLO's mean over its runs with a t-interval, tasks, the host's
load. One figure per SLO: each run's figure, each point's mean and interval, the bound. Below, the
capacity point beside the first failing point above it, on the figures that say where the time went: client queueing (send lag), prefill (TTFT and
the prompt tokens the server had to compute), decode (TPOT), eviction recompute (missed tokens the
server had and lost) and waiting on subagents (join wait). Every number is read from the points'
summary.json files.
"""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup

from harness.analysis.capacity import others_load, run_load
from harness.report.capacity_text import band_sentence, binding_sentence, notes
from harness.report.embed import figure_html
from harness.report.html import CSS
from harness.report.jinja import render, table
from harness.report.numbers import fmt
from harness.report.plots.base import figure

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


STATE_COLOURS = {"met": "tab:blue", "mixed": "tab:orange", "missed": "tab:red", "undecided": "grey"}


def write_capacity_report(result: dict, out: Path) -> Path:
    points = result["points"]
    low, high = result["band"]
    band = f"{low}-{high}" if high is not None else f"{low} and above"
    parts = [
        _points_table(result),
        *(_slo_figure(name, points) for name in result["slos"]),
        _why(result),
    ]
    page = out / CAPACITY_PAGE
    text = render(
        "capacity.html",
        css=Markup(CSS),  # the report's own style sheet, not data
        low=low,
        band=band,
        band_sentence=band_sentence(result),
        binding_sentence=binding_sentence(result),
        notes=notes(result),
        rule=_rule(result),
        parts=parts,
    )
    page.write_text(text, encoding="utf-8")
    return page


def _rule(result: dict) -> str:
    r = result["rule"]
    return (
        f"Every SLO ({_slos(result)}) is judged on each run's own figure; a run is one sample. "
        f"A point is decided by one run when every figure lies more than {r['near']:.0%} inside "
        f"its bound or one lies more than {r['near']:.0%} past it; otherwise by {r['repeats']} "
        "runs or more: met when all of them met, missed when fewer than half did, mixed between. "
        f"A run that served fewer than {r['min_tasks']} tasks is undecided, never met. The "
        "capacity is the largest met point with no failing point below it; the band ends at the "
        "lowest point missed above the highest met one (harness capacity)."
    )


def _slos(result: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in result["slos"].items())


def _points_table(result: dict) -> str:
    names = list(result["slos"])
    header = ["concurrency", "state", "met runs", *(f"{n}: mean [95 % t-interval]" for n in names)]
    header += ["tasks (complete)", "host load / CPU (others)", "wall s"]
    rows = [[*_row(p, names)] for p in result["points"]]
    return Markup("<h2>Points tried</h2>") + table(header, rows)


def _row(p: dict, names: list[str]) -> list[str]:
    runs = p["runs"]
    return [
        str(p["concurrency"]),
        p["state"] + (" (near the bound)" if p["near"] else ""),
        f"{p['met_runs']} of {p['decided_runs']}"
        + (f", {p['busy_runs']} on a busy host" if p["busy_runs"] else ""),
        *(_spread(p["slos"][n]) for n in names),
        ", ".join(f"{r['tasks']} ({r['tasks_complete']})" for r in runs),
        ", ".join(_load(r["host"]) for r in runs),
        ", ".join(fmt(r["wall_s"], ".0f") for r in runs),
    ]


def _spread(s: dict) -> str:
    if s["mean"] is None:
        return "-"
    interval = f" [{fmt(s['interval'][0])}, {fmt(s['interval'][1])}]" if s["interval"] else ""
    return f"{fmt(s['mean'])}{interval}"


def _load(host: dict) -> str:
    others, load = others_load(host), run_load(host)
    cpus = host.get("cpus") or 1
    return f"{fmt(load / cpus if load is not None else None, '.2f')} ({fmt(others, '.2f')})"


def _slo_figure(name: str, points: list[dict]) -> str:
    fig, ax = figure(f"{name} by concurrency (dots: runs; bar: 95 % t-interval over runs)")
    for p in points:
        s = p["slos"][name]
        colour = STATE_COLOURS[p["state"]]
        values = [v for v in s["values"] if v is not None]
        ax.plot([p["concurrency"]] * len(values), values, ".", color=colour, alpha=0.5)
        if s["mean"] is not None:
            lo, hi = s["interval"] or (s["mean"], s["mean"])
            ax.errorbar(
                p["concurrency"],
                s["mean"],
                [[s["mean"] - lo], [hi - s["mean"]]],
                fmt="o",
                color=colour,
            )
    if points:
        ax.axhline(points[0]["slos"][name]["bound"], color="grey", linestyle="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent tasks (load.concurrency); blue met, orange mixed, red missed")
    return figure_html(name, fig)


def _why(result: dict) -> str:
    points = {p["concurrency"]: p for p in result["points"]}
    last = points.get(result["capacity"])
    first = points.get((result.get("binding") or {}).get("concurrency"))
    if last is None or first is None:
        return Markup(
            '<p class="note">No met point with a failing one above it: nothing to set side by side.</p>'
        )
    sides = [(last, _run(last, missed=False)), (first, _run(first, missed=True))]
    rows = [[label, *(fmt(_read(get, _summary(run))) for _, run in sides)] for label, get in WHY]
    header = ["where the time went", *(_column(p, run) for p, run in sides)]
    return Markup("<h2>Why the first failing point failed</h2>") + table(header, rows)


def _run(point: dict, *, missed: bool) -> dict:
    """The point's first run that met (or, for a failing point, missed) every SLO."""
    for run in point["runs"]:
        meets = all(
            f is not None and (f <= s["bound"] if s["upper"] else f >= s["bound"])
            for f, s in ((run["figures"].get(k), s) for k, s in point["slos"].items())
        )
        if meets != missed:
            return run
    return point["runs"][0]


def _column(point: dict, run: dict) -> str:
    which = f", run {point['runs'].index(run) + 1} of {len(point['runs'])}"
    return f"{point['concurrency']} tasks ({point['state']}{which})"


def _summary(run: dict) -> dict:
    path = Path(run["path"]) / "summary.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _read(get, summary: dict):
    try:
        return get(summary)
    except (KeyError, TypeError):
        return None
