"""The terminal view of a summary: plain text tables, each saying what it covers and what failed."""

from __future__ import annotations

from typing import Literal

from harness.analysis.client_check import host_line
from harness.analysis.summary_types import PercentileKey, Summary
from harness.report.cache_parts import text_lines as cache_part_lines
from harness.report.cache_words import (
    granularity_line,
    hosted_lines,
    moves_line,
    server_hit,
    token_space_line,
)
from harness.report.misses import approximate_tag, missed_line, rules_line
from harness.report.numbers import fmt
from harness.report.speculation import spec_lines
from harness.report.tested import tested_rows, tpgs_caveat
from harness.report.validity import context_lines

LATENCY_ROWS: tuple[tuple[str, PercentileKey], ...] = (
    ("TTFT", "ttft_s"),
    ("TPOT", "tpot_s"),
    ("ITL (token-weighted)", "itl_s"),
    ("E2EL", "e2el_s"),
)
GROUPS: tuple[tuple[Literal["by_agent", "by_endpoint"], str], ...] = (
    ("by_agent", "by agent"),
    ("by_endpoint", "by endpoint"),
)
COLUMNS: tuple[Literal["p50", "p90", "p95", "p99", "mean", "max"], ...] = (
    "p50",
    "p90",
    "p95",
    "p99",
    "mean",
    "max",
)


def coverage(s: Summary) -> str:
    errors = ", ".join(f"{k} {v}" for k, v in s.get("errors_by_class", {}).items())
    excluded = s.get("requests_excluded", {})
    line = f"{s['requests_ok']} ok, {s['requests_failed']} failed"
    if errors:
        line += f" ({errors})"
    if s.get("requests_cancelled"):
        line += f", {s['requests_cancelled']} cancelled by the run's stop"
    return f"{line}; excluded {excluded.get('warmup', 0)} warm-up, {excluded.get('cooldown', 0)} cool-down"


def summary_table(s: Summary) -> str:
    head = f"run {s['run_id']}" + (
        "  [timings from a SIMULATED engine]" if s.get("simulated") else ""
    )
    tested = [f"{label + ':':<13}{text}" for label, text in tested_rows(s)]
    lines = [head, *context_lines(s), *tested, *_imported(s.get("imported"))]
    lines += [f"measured requests: {coverage(s)}", *_short(s.get("short_replies")), ""]
    lines += _latency_table(s)
    lines += ["", *_headline(s), *spec_lines(s), "", *_cache(s), "", *_sessions(s), *_window(s)]
    lines += [f"warning: {w}" for w in s.get("warnings", [])]
    return "\n".join(lines)


def _short(short: dict | None) -> list[str]:
    """Replies that ended before the trace's output length (summary.json `short_replies`)."""
    if not short or not short["short"]:
        return []
    return [
        f"short replies: {short['short']} of {short['requests']} ok {short['api'] or ''} replies"
        f" ({fmt(100 * short['share'], '.2g')} %) below the trace's output length,"
        f" {short['tokens_missing']} of {short['tokens_asked']} tokens missing; they bias"
        f" {'; '.join(short['biases'])}"
    ]


def _imported(imported: dict | None) -> list[str]:
    if not imported:
        return []
    return [
        f"imported from {imported['tool']} ({imported['source']}); defined differently or missing:",
        *(f"  - {note}" for note in imported["notes"]),
    ]


def _latency_table(s: Summary) -> list[str]:
    width = max(len(label) for label, _ in LATENCY_ROWS) + 6
    header = f"{'latency (s)':<{width}}{'count':>8}" + "".join(f"{c:>10}" for c in COLUMNS)
    rows = [header, "-" * len(header)]
    for label, key in LATENCY_ROWS:
        p = s[key]
        rows.append(
            f"{label:<{width}}{p['count']:>8}" + "".join(f"{fmt(p[c]):>10}" for c in COLUMNS)
        )
    rows.append(
        f"(over {s['requests_ok']} ok requests; {s['requests_failed']} failed requests not included)"
    )
    return rows


def _headline(s: Summary) -> list[str]:
    t, parts = s["throughput"], s["tpgs_parts"]
    out = [
        f"P90 interactivity        {fmt(s['interactivity_p90'])} tok/s/user   (1 / p90 TPOT)",
        f"E2E-norm. interactivity  {fmt(s['e2e_interactivity_p90'])} tok/s/user   (1 / p90 E2EL per token)",
        f"TPGS                     {fmt(s['tpgs'])} tok/s/GPU on {fmt(s['n_gpus'], 'g')} GPU(s) ({s['n_gpus_source']})"
        f" = cached {fmt(parts['cached'])} + uncached input {fmt(parts['uncached_input'])}"
        f" + output {fmt(parts['output'])}",
        f"                         {tpgs_caveat(s)}",
        f"throughput               {fmt(t['requests_per_s'])} req/s, {fmt(t['sessions_per_s'])} tasks/s,"
        f" {fmt(t['output_tokens_per_s'])} output tok/s over {fmt(t['duration_s'])} s",
    ]
    g = s.get("goodput")
    if g:
        slos = ", ".join(f"{k}={v:g}" for k, v in g["slos"].items())
        attained = ", ".join(
            f"{k} {fmt(a['value'])} {'met' if a['met'] else 'MISSED'}"
            for k, a in g["attained"].items()
        )
        out.append(
            f"goodput                  {fmt(g['requests_per_s'])} req/s, {fmt(g['sessions_per_s'])} tasks/s"
            f" ({g['requests_meeting']} of {g['requests']} requests meet {slos})"
        )
        if attained:
            out.append(f"SLOs at run level        {attained}")
    return out


def _cache(s: Summary) -> list[str]:
    c = s["cache"]
    out = [
        f"cache hit rate           server {fmt(s['cache_hit_rate'], '.3f')} vs ideal"
        f" {fmt(s['ideal_cache_hit_rate'], '.3f')} (over {c['requests_reported']} of {c['requests']}"
        f" ok requests that reported cached tokens; {s['requests_failed']} failed not included)",
        f"cache granularity        {granularity_line(c['granularity'])}",
        f"missed prompt tokens     {missed_line(c)}{approximate_tag(c)}",
    ]
    if rules_line(c):
        out.append(f"server rules             {rules_line(c)}")
    out += [f"{label:<25}{text}" for label, text in hosted_lines(c)]
    server = s.get("server_cache")
    if server:
        out.append(f"server /metrics hit rate {server_hit(server)}")
    out += _token_space(c.get("token_space"))
    for key, label in GROUPS:
        groups = c.get(key) or {}
        if len(groups) > 1 or key == "by_agent" and groups:
            parts = [
                f"{g} {fmt(v['hit_rate'], '.3f')} (ideal {fmt(v['ideal_hit_rate'], '.3f')}, {v['requests']} req)"
                for g, v in groups.items()
            ]
            out.append(f"{label:<25}" + "; ".join(parts))
    moves = c.get("session_moves")
    if moves:
        out.append(f"endpoint moves           {moves_line(moves)}")
    return out + cache_part_lines(c)


def _token_space(t: dict | None) -> list[str]:
    line = token_space_line(t)
    return [f"token space              {line}"] if line else []


def _sessions(s: Summary) -> list[str]:
    x = s["sessions"]
    tc, cp, jw = x["task_completion_s"], x["critical_path_service_s"], x["join_wait_s"]
    by_tool = x.get("tasks_complete_by_tool")
    complete = (
        f"{x['tasks_complete']} complete"
        if by_tool is None
        else f"{by_tool} complete by the tool's own log ({x['tasks_complete']} whose exported "
        "requests all succeeded)"
    )
    if x["tasks_complete"] is None:  # an import that cannot say (analysis.summary)
        complete = (
            f"unknown complete (the export does not say; {x.get('tasks_exported_ok')} whose"
            " exported requests all succeeded)"
        )
    return [
        f"tasks                    {complete} of {x['tasks']} ({x['sessions']} sessions;"
        f" structure {x['structure']})",
        f"task completion (s)      p50 {fmt(tc['p50'])}  p90 {fmt(tc['p90'])}  max {fmt(tc['max'])}",
        f"critical path in server  p50 {fmt(cp['p50'])}  p90 {fmt(cp['p90'])} s;"
        f" join wait p50 {fmt(jw['p50'])}  p90 {fmt(jw['p90'])} s",
    ]


def _window(s: Summary) -> list[str]:
    w, c = s.get("window"), s.get("client")
    if not w:
        return []
    target = (
        f" (target {w['target_tasks']}, {fmt(w['tasks_held'], '.1%')} held)"
        if w.get("target_tasks")
        else ""
    )
    out = [
        f"load held                {fmt(w['tasks_in_flight_mean'], '.3g')} tasks,"
        f" {fmt(w['requests_in_flight_mean'], '.3g')} requests in flight{target}"
        f" over {fmt(w['start_s'], '.4g')}-{fmt(w['end_s'], '.4g')} s ({w['mode']})"
    ]
    if c:
        out.append(
            f"client                   send lag p99 {fmt(c['send_lag_s']['p99'], '.3g')} s,"
            f" loop lag p99 {fmt(c['loop_lag_s']['p99'], '.3g')} s,"
            f" loop thread CPU {fmt(c['loop_cpu_share'], '.0%')}"
            + (f"; host {host_line(c['host_load'])}" if c.get("host_load") else "")
        )
    return out
