"""The report's HTML tables: one column per run, each table saying what it covers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from markupsafe import Markup

from harness.analysis.cache import GROUPINGS, MISS_COLUMNS, group_label
from harness.analysis.compare.notes import interval_text
from harness.analysis.summary_types import Analysis, Summary
from harness.report.cache_words import granularity_line, server_hit
from harness.report.jinja import join, table, template_module
from harness.report.misses import approximate_tag, label, missed_line, rules_line
from harness.report.numbers import fmt

if TYPE_CHECKING:  # its module imports scipy's statistics, which a one-run page never needs
    from harness.analysis.compare.verdict import Judgement

ROWS = (
    ("requests ok / failed", lambda s: f"{s['requests_ok']} / {s['requests_failed']}"),
    (
        "errors by class",
        lambda s: ", ".join(f"{k} {v}" for k, v in s["errors_by_class"].items()) or "none",
    ),
    (
        "excluded warm-up / cool-down",
        lambda s: f"{s['requests_excluded']['warmup']} / {s['requests_excluded']['cooldown']}",
    ),
    *(
        (f"{label} {q} (s)", lambda s, k=key, q=q: fmt(s[k][q]))
        for label, key in (
            ("TTFT", "ttft_s"),
            ("TPOT", "tpot_s"),
            ("ITL (token-weighted)", "itl_s"),
            ("E2EL", "e2el_s"),
        )
        for q in ("p50", "p90", "p99", "mean", "max")
    ),
    ("P90 interactivity (tok/s/user)", lambda s: fmt(s["interactivity_p90"])),
    ("E2E-normalized interactivity (tok/s/user)", lambda s: fmt(s["e2e_interactivity_p90"])),
    ("TPGS (tok/s/GPU)", lambda s: f"{fmt(s['tpgs'])} on {fmt(s['n_gpus'], 'g')} GPU(s)"),
    (
        "  cached / uncached input / output",
        lambda s: " / ".join(fmt(v) for v in s["tpgs_parts"].values()),
    ),
    ("requests/s", lambda s: fmt(s["throughput"]["requests_per_s"])),
    ("tasks/s", lambda s: fmt(s["throughput"]["sessions_per_s"])),
    ("output tokens/s", lambda s: fmt(s["throughput"]["output_tokens_per_s"])),
    ("goodput req/s (SLOs)", lambda s: _goodput(s)),
    (
        "cache hit rate: server / ideal",
        lambda s: f"{fmt(s['cache_hit_rate'], '.3f')} / {fmt(s['ideal_cache_hit_rate'], '.3f')}",
    ),
    ("server /metrics prefix-cache hit rate", lambda s: server_hit(s.get("server_cache"))),
    (
        "cache granularity (tokens, source)",
        lambda s: (
            f"{s['cache']['granularity']['block_size']} ({s['cache']['granularity']['source']})"
        ),
    ),
    ("missed prompt tokens (shares of all prompt tokens)", lambda s: missed_line(s["cache"])),
    ("server rules (records' evidence)", lambda s: rules_line(s["cache"]) or "-"),
    (
        "tasks complete / all",
        lambda s: _tasks_complete(s["sessions"]),
    ),
    ("task completion p50 / p90 (s)", lambda s: _pair(s["sessions"]["task_completion_s"])),
    (
        "critical path in server p50 / p90 (s)",
        lambda s: _pair(s["sessions"]["critical_path_service_s"]),
    ),
    ("join wait p50 / p90 (s)", lambda s: _pair(s["sessions"]["join_wait_s"])),
    ("session structure", lambda s: s["sessions"]["structure"]),
    ("timings", lambda s: "SIMULATED engine" if s.get("simulated") else "measured"),
)


def _pair(p: dict) -> str:
    return f"{fmt(p['p50'])} / {fmt(p['p90'])}"


def _goodput(s: Summary) -> str:
    g = s.get("goodput")
    if not g:
        return "no SLOs given"
    slos = ", ".join(f"{k}={v:g}" for k, v in g["slos"].items())
    return f"{fmt(g['requests_per_s'])} ({g['requests_meeting']}/{g['requests']}; {slos})"


def summary_rows(analyses: list[Analysis]) -> Markup:
    header = ["metric", *(a.run.name for a in analyses)]
    rows = [[label, *(get(a.summary) for a in analyses)] for label, get in ROWS]
    note = "Latencies and rates over measured requests with status ok; failed requests are counted, not timed."
    return table(header, rows, note)


def compare_section(analyses: list[Analysis], results: list[Judgement]) -> Markup:
    """One table: each headline metric of the first run, then each other run's value, its change and
    the verdict against the first (`SideBySide.against_first`: the rule of `harness compare`)."""
    header = ["metric", analyses[0].run.name]
    for other in analyses[1:]:
        header += [other.run.name, "change", "interval", "verdict"]
    rows = []
    for i, base_row in enumerate(results[0].rows):
        row = [base_row.label, fmt(base_row.baseline)]
        for result in results:
            r = result.rows[i]
            row += [
                fmt(r.run),
                "n/a" if r.change is None else f"{r.change * 100:+.1f}%",
                interval_text(r),
                f"not comparable: {r.why_not}" if r.why_not else str(r.verdict),
            ]
        rows.append(row)
    note = (
        f"Against {analyses[0].run.name}, as harness compare: each run's figure one sample, a"
        f" {100 * (1 - results[0].alpha):g}% interval across runs; one run a side is at most"
        " inconclusive (no between-run spread to call it significant)."
    )
    return table(header, rows, note)


TABLE_TITLES = {"turn": "turn index", "time": "time (s)"}  # the others by their key


def cache_tables(analyses: list[Analysis]) -> Markup:
    """By agent, endpoint, turn and time: one table per run (the run named once, in the caption)."""
    cache = template_module("cache.html")
    lines = cache.run_lines
    out = []
    for a in analyses:  # what the ideal is counted in, and where every missed token went
        c = a.summary["cache"]
        grain, missed = granularity_line(c["granularity"]), missed_line(c)
        out.append(lines(a.run.name, grain, missed, approximate_tag(c), rules_line(c) or "-"))
    for key in GROUPINGS:  # the analysis's tables, in its order
        title = TABLE_TITLES.get(key, key)
        out.append(cache.heading(title))
        for a in analyses:
            t = a.tables[key]
            shown = [c for c in MISS_COLUMNS if t[c].any() or c == "miss_evicted"]
            rows = [
                [
                    group_label(group),
                    int(r["requests"]),
                    int(r["failed"]),
                    int(r["reported"]),
                    fmt(r["hit_rate"], ".3f"),
                    fmt(r["ideal_hit_rate"], ".3f"),
                    *(f"{r[c]:.0f}" for c in shown),
                ]
                for group, r in t.head(30).iterrows()
            ]
            header = [
                title,
                "ok requests",
                "failed",
                "reported cached",
                "hit rate",
                "ideal",
                *(f"missed tokens: {label(c.removeprefix('miss_'))}" for c in shown),
            ]
            note = (
                f"{a.run.name}: hit rates over ok requests whose server reported cached tokens;"
                " missed prompt tokens by category (tokens, not shares; categories that are 0"
                " everywhere left out)."
            )
            out.append(table(header, rows, note))
    return join(out)


def task_tables(analyses: list[Analysis], top: int = 10) -> Markup:
    out = []
    for a in analyses:
        tasks = a.tasks
        done = tasks[tasks["complete"]].sort_values("completion_s", ascending=False).head(top)
        rows = [
            [
                t.task,
                t.sessions,
                t.requests,
                fmt(t.completion_s),
                fmt(t.critical_path_service_s),
                t.critical_path_requests,
                t.critical_path_sub_requests,
                fmt(t.join_wait_s),
            ]
            for t in done.itertuples(index=False)
        ]
        note = (
            f"{a.run.name}: the {len(rows)} slowest of {int(tasks['complete'].sum())} complete tasks"
            f" ({len(tasks)} in all; structure {a.summary['sessions']['structure']})."
        )
        header = [
            "task",
            "sessions",
            "requests",
            "completion (s)",
            "critical path in server (s)",
            "requests on path",
            "subagent requests on path",
            "join wait (s)",
        ]
        out.append(table(header, rows, note))
    return join(out)


def _tasks_complete(x: dict) -> str:
    """`complete / tasks`; an import whose tool logged its completed sessions shows that count
    (the export alone cannot tell a task that ran all its turns from one cut short)."""
    by_tool = x.get("tasks_complete_by_tool")
    if x["tasks_complete"] is None:
        return (
            f"unknown / {x['tasks']} ({x.get('tasks_exported_ok')} with all exported requests ok)"
        )
    if by_tool is None:
        return f"{x['tasks_complete']} / {x['tasks']}"
    return f"{by_tool} / {x['tasks']} (tool's log; {x['tasks_complete']} with all requests ok)"
