"""Speed and memory of the trace tools, each beside a baseline measured in the same run.

    .venv/bin/python benchmarks/bench_trace.py [--sessions 10000] [--stats-sessions 2000] [--json FILE]

Each measurement runs in a fresh subprocess so its peak RSS (`ru_maxrss`) is its own; the
"import only" subprocess does nothing, so `rss_over_import` is what the work itself cost. CPU
time is reported beside wall time because a shared machine stretches wall time; "part CPU s" is
the CPU time of the step after generating its input trace. Baselines measured in the same run:
the native writer vs plain `json.dumps` of the same sessions, and incremental stats vs the naive
walk of every full prompt through the ideal cache.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SETUP = """
import json, resource, sys, time
from harness.trace.generate import generate
from harness.trace.profile import load_profile
from harness.trace.stats import compute_stats
from harness.trace.content import Content
from harness.trace.prefix import IdealPrefixCache
from harness.trace.timeline import send_order
from harness.trace.native import session_obj, write_trace
from harness.trace.mooncake import write_mooncake
"""


def _timed(op: str) -> str:
    """Generate a trace untimed, then time `op` on it (CPU seconds of that part)."""
    return "trace = generate(load_profile(), seed=1, sessions={n})\nstart()\n" + op + "\nstop()"


TASKS = {
    "import only": "pass",
    "generate": "trace = generate(load_profile(), seed=1, sessions={n})",
    "generate + write native": _timed("write_trace(trace, '{tmp}/t.jsonl')"),
    "baseline: json.dumps of the same trace": _timed(
        "with open('{tmp}/b.jsonl', 'w') as f:\n"
        "    f.writelines(json.dumps(session_obj(s)) + '\\n' for s in trace.sessions)"
    ),
    "stats (ideal cache)": _timed("compute_stats(trace)"),
    "baseline: naive full-prompt walk": _timed(
        "c, cache = Content(trace), IdealPrefixCache(16)\n"
        "hits = [cache.observe(c.segments(s, k)) for _, s, k in send_order(trace)]"
    ),
    "stats (+ LRU 50M tokens)": _timed("compute_stats(trace, cache_tokens=50_000_000)"),
    "mooncake export": _timed("write_mooncake(trace, '{tmp}/m.jsonl')"),
}

RUNNER = """
timed = None
def start():
    global s0
    s0 = time.process_time()
def stop():
    global timed
    timed = time.process_time() - s0
t0, c0 = time.perf_counter(), time.process_time()
{body}
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"wall_s": wall, "cpu_s": cpu, "timed_s": timed, "rss": rss}}))
"""


def measure(task: str, sessions: int, tmp: Path) -> dict:
    body = TASKS[task].format(n=sessions, tmp=tmp)
    code = SETUP + RUNNER.format(body=body)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sessions", type=int, default=10_000, help="sessions for generation (default 10000)"
    )
    ap.add_argument(
        "--stats-sessions", type=int, default=2000, help="sessions for stats (default 2000)"
    )
    ap.add_argument(
        "--naive-sessions",
        type=int,
        default=300,
        help="sessions for the naive walk and LRU (default 300)",
    )
    ap.add_argument(
        "--export-sessions",
        type=int,
        default=100,
        help="sessions for the Mooncake export (default 100)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    tmp = Path(f"/tmp/bench_trace_{time.monotonic_ns()}")
    tmp.mkdir(parents=True)
    plan = [
        ("import only", "import only", 0),
        ("generate", "generate", args.sessions),
        ("generate + write native", "generate + write native", args.sessions),
        (
            "baseline: json.dumps of the same trace",
            "baseline: json.dumps of the same trace",
            args.sessions,
        ),
        ("stats (ideal cache)", "stats (ideal cache)", args.stats_sessions),
        ("stats (ideal cache), small", "stats (ideal cache)", args.naive_sessions),
        (
            "baseline: naive full-prompt walk",
            "baseline: naive full-prompt walk",
            args.naive_sessions,
        ),
        ("stats (+ LRU 50M tokens)", "stats (+ LRU 50M tokens)", args.naive_sessions),
        ("mooncake export", "mooncake export", args.export_sessions),
    ]
    results = {}
    for label, task, n in plan:
        results[label] = {"sessions": n, **measure(task, n, tmp)}
    base_rss = results["import only"]["rss"]
    print(
        f"{'task':40} {'sessions':>8} {'wall s':>8} {'CPU s':>8} {'part CPU s':>10} {'RSS over import MiB':>20}"
    )
    for task, r in results.items():
        r["rss_over_import"] = r["rss"] - base_rss
        timed = "-" if r["timed_s"] is None else f"{r['timed_s']:.2f}"
        timed = f"{timed:>10}"
        print(
            f"{task:40} {r['sessions']:>8} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {timed} "
            f"{r['rss_over_import'] / 2**20:>20.0f}"
        )
    write_s = results["generate + write native"]["timed_s"]
    dumps_s = results["baseline: json.dumps of the same trace"]["timed_s"]
    print(
        f"\nnative write vs plain json.dumps of the same sessions (CPU): {write_s:.2f} s vs {dumps_s:.2f} s"
    )
    naive = results["baseline: naive full-prompt walk"]["timed_s"]
    incremental = results["stats (ideal cache), small"]["timed_s"]
    print(
        f"stats vs naive walk ({args.naive_sessions} sessions, CPU): {naive / incremental:.1f}x faster"
    )
    print(
        f"generation: {args.sessions / results['generate']['cpu_s']:,.0f} sessions per CPU second"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
