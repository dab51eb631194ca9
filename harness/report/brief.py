"""The terminal summary a run ends with, in the order a person asks: what ran, did it hold, latency
and interactivity against the SLOs, throughput, the cache hit against the ideal with the top miss
cause, then warnings. About 15 lines, each under 100 columns; `--verbose` prints every figure
(report/text.py), as summary.json and the report keep them."""

from __future__ import annotations

import re
import textwrap
from typing import Literal

from harness.analysis.slo import LATENCIES
from harness.analysis.summary_types import PercentileKey, Summary
from harness.report.misses import label
from harness.report.numbers import fmt, share
from harness.report.speculation import spec_lines
from harness.report.tested import tested_rows, tpgs_caveat
from harness.report.text import coverage
from harness.report.validity import context_lines

WIDTH = 99
LABEL = 11  # the width of a line's label column
WARNINGS = 3  # warnings shown; the rest counted
WARNING_LINES = 2
LATENCY: tuple[tuple[str, PercentileKey, str], ...] = (
    ("TTFT", "ttft_s", "ttft"),
    ("TPOT", "tpot_s", "tpot"),
    ("E2EL", "e2el_s", "e2el"),
)
COLUMNS: tuple[Literal["p50", "p90", "p99"], ...] = ("p50", "p90", "p99")


def brief(s: Summary, width: int = WIDTH) -> str:
    """The summary, every line at most `width` columns (a long one wrapped under its label; an
    80-column terminal passes 79)."""
    lines = [
        *_ran(s),
        "",
        *_latency(s),
        "",
        *_throughput(s),
        *_cache(s),
        *_warnings(s.get("warnings") or [], width),
        "more: --verbose, summary.json or the report",
    ]
    return "\n".join(line for text in lines for line in _wrap(text, width))


def _line(name: str, text: str) -> str:
    return f"{name:<{LABEL}}{text}"


KEEP = "\x00"  # a space no line breaks at: a figure and its unit stay together
UNIT = re.compile(r"(?<=\d) (?=(?:%|s|ms|tok/s|tok/s/user|tok/s/GPU)\b|%)")


def _wrap(text: str, width: int = WIDTH) -> list[str]:
    if len(text) <= width:
        return [text]
    kept = UNIT.sub(KEEP, text)
    lines = textwrap.wrap(kept, width, subsequent_indent=" " * LABEL, break_on_hyphens=False)
    return [line.replace(KEEP, " ") for line in lines]


def _ran(s: Summary) -> list[str]:
    """What ran (target, model, API, load) and whether it held its load."""
    t = dict(tested_rows(s))
    simulated = " [timings from a SIMULATED engine]" if s.get("simulated") else ""
    head = [f"run {s['run_id']}{simulated}", *context_lines(s)]
    if t:
        head.append(_line("target", t["target"]))
        head.append(_line("model", f"{t['model']} · {t['API']} · {_device(s)}"))
        scale = (s.get("tested") or {}).get("token_scale")
        head.append(_line("load", t["load"] + (f" · tokens x{scale:g}" if scale else "")))
    imported = s.get("imported")
    if imported:
        notes = len(imported["notes"])
        head.append(_line("imported", f"from {imported['tool']}; {notes} figures defined"
                                       " differently or missing (--verbose)"))  # fmt: skip
    return [*head, *_held(s, t), _line("requests", coverage(s))]


def _device(s: Summary) -> str:
    name = ((s.get("tested") or {}).get("device") or {}).get("name")
    return f"device {name}" if name else "device not reported"


def _held(s: Summary, t: dict) -> list[str]:
    w = s.get("window") or {}
    if not w:
        return []
    span = w["end_s"] - w["start_s"]
    inflight = fmt(w["tasks_in_flight_mean"], ".3g")
    target = w.get("target_tasks")
    held = (
        f"{inflight} of {target} tasks in flight ({fmt(w['tasks_held'], '.1%')})"
        if target
        else f"{inflight} tasks in flight"
    )
    tasks = f"; tasks {t['tasks']}" if t.get("tasks") else ""
    return [_line("held", f"{held} over the {fmt(span, '.3g')} s window{tasks}")]


def _latency(s: Summary) -> list[str]:
    """p50, p90, p99 of each latency, and each SLO set on it, met or MISSED."""
    slos = _slos(s)
    rows = [f"{'latency (s)':<15}" + "".join(f"{c:>9}" for c in COLUMNS) + f"{'count':>8}   SLO"]
    for name, key, metric in LATENCY:
        p = s[key]
        cells = "".join(f"{fmt(p[c], '.3g'):>9}" for c in COLUMNS)
        rows.append(f"{name:<15}{cells}{p['count']:>8}   {slos.pop(metric, '')}".rstrip())
    interactivity = f"{fmt(s['interactivity_p90'], '.3g')} tok/s/user at p90 (1 / p90 TPOT)"
    rows.append(f"{'interactivity':<15}{interactivity:<38}{slos.pop('interactivity', '')}".rstrip())
    rows += [_line("SLO", text) for text in slos.values()]  # on a metric not in the table
    return rows


def _slos(s: Summary) -> dict[str, str]:
    """Each metric's run-level SLOs in words, 'p90 <= 1 s: met', by metric."""
    g = s.get("goodput") or {}
    out: dict[str, list[str]] = {}
    for name, a in (g.get("attained") or {}).items():
        metric, _, q = name.rpartition("_p")
        upper = metric in LATENCIES
        bound = f"{'<=' if upper else '>='} {g['slos'][name]:g}{' s' if upper else ''}"
        verdict = {True: "met", False: "MISSED", None: "no data"}[a["met"]]
        out.setdefault(metric, []).append(f"p{q} {bound}: {verdict}")
    return {m: "; ".join(texts) for m, texts in out.items()}


def _throughput(s: Summary) -> list[str]:
    t = s["throughput"]
    rates = (
        f"{fmt(s['tpgs'])} tok/s/GPU · {fmt(t['requests_per_s'], '.3g')} req/s ·"
        f" {fmt(t['output_tokens_per_s'], '.3g')} output tok/s"
    )
    out = [_line("throughput", rates), _line("", tpgs_caveat(s))]
    g = s.get("goodput")
    if g:
        out.append(
            _line(
                "goodput",
                f"{fmt(g['requests_per_s'], '.3g')} req/s meet every SLO"
                f" ({g['requests_meeting']} of {g['requests']} requests)",
            )
        )
    return out + spec_lines(s)


def _cache(s: Summary) -> list[str]:
    """The hit against the ideal, and the share missed with its largest cause."""
    c = s["cache"]
    hit = f"{fmt(s['cache_hit_rate'], '.3f')} vs ideal {fmt(s['ideal_cache_hit_rate'], '.3f')}"
    prompt = c.get("prompt_tokens")
    misses = {k: v for k, v in c["miss_tokens"].items() if isinstance(v, int | float) and v > 0}
    if not prompt or not misses:
        return [_line("cache hit", hit + ("; nothing missed" if prompt else ""))]
    top = max(misses, key=lambda k: misses[k])
    missed = sum(misses.values())
    return [
        _line(
            "cache hit",
            f"{hit} · {share(missed, prompt)} of prompt tokens missed, most {label(top)}"
            f" ({share(misses[top], prompt)})",
        )
    ]


def _warnings(warnings: list[str], width: int) -> list[str]:
    """Up to WARNINGS warnings, each in at most WARNING_LINES lines (cut with '…': --verbose and
    the report have them whole), then how many more there are."""
    if not warnings:
        return [_line("warnings", "none")]
    out = [
        line for w in warnings[:WARNINGS] for line in _cut(_wrap(_line("warning", w), width), width)
    ]
    more = len(warnings) - WARNINGS
    if more > 0:
        out.append(_line("", f"and {more} more warning{'s' if more > 1 else ''} (--verbose)"))
    return out


def _cut(lines: list[str], width: int) -> list[str]:
    if len(lines) <= WARNING_LINES:
        return lines
    last = lines[WARNING_LINES - 1]
    return [*lines[: WARNING_LINES - 1], last[: width - 1].rsplit(" ", 1)[0] + " …"]
