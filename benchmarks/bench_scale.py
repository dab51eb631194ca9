"""How the harness's own work grows: generator, replay planner and analyzer at 1x and 10x.

    .venv/bin/python benchmarks/bench_scale.py [--sessions 2000] [--factor 10] [--json FILE]

Default size (1x) = the AgentX profile's default session count (`workloads/agentx.yaml`:
2,000 sessions, ~160k requests); 10x = 20,000 sessions. Each step runs in a fresh subprocess so
its peak RSS (`ru_maxrss`) is its own; "import only" is the baseline RSS, measured in the same run,
and every step reports its peak over that. Steps:

- generate: `trace.generate` of N sessions;
- plan: the distributed replay planner, what the coordinator does before the first request:
  the arrival draw (open loop), `plan_shards` over 8 workers, and each shard's trace pickled as
  it travels to its worker;
- ideal: `analysis.ideal.shared_prefixes`, the analyzer's ideal-cache walk over the records in
  send order (the records and the trace already read; part of `analyze`);
- analyze: `analysis.summary.analyze_run` (summary.json + HDR histograms) on a synthetic run
  folder with one record per request of the trace (consistent session timelines, three chunks
  per reply), with its trace.

Growth is time(10x) / time(1x): ~10 is linear. The machine may be shared: numbers are noisy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]

RUNNER = """
import json, pickle, resource, time
from harness.trace.generate import generate
from harness.trace.profile import load_profile
from harness.driver.config import ReplayConfig
from harness.distributed.shard import plan_shards, shard_trace
from harness.analysis.ideal.walk import shared_prefixes
from harness.analysis.records import read_records
from pathlib import Path
from harness.analysis.summary import analyze_run
from harness.trace.native import read_trace
N, RUN = {n}, {run!r}
{prep}
t0, c0 = time.perf_counter(), time.process_time()
{code}
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": rss}}))
"""

GENERATE = "trace = generate(load_profile(), seed=1, sessions=N)"
STEPS = {  # name -> (untimed preparation, timed code)
    "import only": ("", "pass"),
    "generate": ("", GENERATE),
    "plan": (
        GENERATE,
        "plan = plan_shards(trace, ReplayConfig(load='open', session_rate=0.5), 8)\n"
        "blobs = [pickle.dumps((shard_trace(trace, sh), sh.starts)) for sh in plan.shards]",
    ),
    "analyze": ("", "analyze_run(RUN)"),
    "ideal": (
        "trace = read_trace(RUN + '/trace.jsonl')\nrecords = read_records(Path(RUN) / 'records.jsonl')[0]",
        "shared_prefixes(trace, records)",
    ),
}


def write_run(path: Path, sessions: int) -> int:
    """A run folder with one plausible record per request of the generated trace."""
    from harness.trace.generate import generate
    from harness.trace.native import write_trace
    from harness.trace.profile import load_profile

    trace = generate(load_profile(), seed=1, sessions=sessions)
    path.mkdir(parents=True, exist_ok=True)
    write_trace(trace, path / "trace.jsonl")
    manifest = {
        "schema_version": 1,
        "run_id": "scale",
        "harness_version": "bench",
        "started_at": None,
        "ended_at": None,
        "status": "complete",
        "n_gpus": 8,
        "endpoints": ["e0"],
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    n = 0
    with (path / "records.jsonl").open("wb") as fh:
        for main in trace.main_sessions:
            for rec in _session(trace, main, main.arrival_s, main.system_tokens):
                fh.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
                n += 1
    return n


def _session(trace, s, start: float, prompt: int):
    """Records of a session and its subagents on one consistent timeline (joins included)."""
    t, out = start, []
    for k, turn in enumerate(s.turns):
        t += turn.think_s
        prompt += turn.new_input_tokens
        ttft = 0.02 + prompt * 2e-7
        end = t + ttft + turn.output_tokens * 0.004
        chunks = [round(t + ttft, 4), round((t + ttft + end) / 2, 4), round(end, 4)]
        third = turn.output_tokens // 3
        out.append(
            {
                "run_id": "scale",
                "request_id": f"{s.id}:{k}",
                "session_id": s.id,
                "parent_session_id": s.parent,
                "agent": s.agent,
                "turn": k,
                "endpoint": "e0",
                "t_scheduled": round(t, 4),
                "t_sent": round(t, 4),
                "t_first_token": chunks[0],
                "t_last_token": chunks[-1],
                "t_done": round(end + 1e-3, 4),
                "chunk_times": chunks,
                "chunk_tokens": [1, third, turn.output_tokens - third - 1],
                "prompt_tokens_expected": prompt,
                "output_tokens_expected": turn.output_tokens,
                "cached_tokens_ideal": prompt - turn.new_input_tokens,
                "prompt_tokens": prompt,
                "completion_tokens": turn.output_tokens,
                "cached_tokens": prompt - turn.new_input_tokens,
                "status": "ok",
                "error": None,
                "phase": "measure",
            }
        )
        joined = end
        for child_id in turn.spawns:
            child = trace.session(child_id)
            base = prompt + turn.output_tokens if child.mode == "fork" else child.system_tokens
            kids = _session(trace, child, end, base)
            out.extend(kids)
            joined = max(joined, max(r["t_done"] for r in kids))
        prompt += turn.output_tokens
        t = joined
    return out


def measure(name: str, n: int, run: Path) -> dict:
    prep, code = STEPS[name]
    script = RUNNER.format(n=n, run=str(run), prep=prep, code=code)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=2000, help="the 1x size")
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--steps",
        nargs="+",
        choices=[s for s in STEPS if s != "import only"],
        default=[s for s in STEPS if s != "import only"],
    )
    ap.add_argument("--write-run", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_run:
        print(write_run(Path(args.write_run[0]), int(args.write_run[1])))
        return
    results: dict[str, dict] = {}
    for scale in (1, args.factor):
        n = args.sessions * scale
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run"
            t = time.perf_counter()
            # In its own process: a child's peak RSS starts at its parent's, so the parent
            # must stay small for every step's ru_maxrss to be its own.
            records = int(
                subprocess.run(
                    [sys.executable, __file__, "--write-run", str(run), str(n)],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=ROOT,
                ).stdout
            )
            mb = (run / "records.jsonl").stat().st_size / 2**20
            print(
                f"{scale}x: {n} sessions, {records} records ({mb:.0f} MB) written in "
                f"{time.perf_counter() - t:.0f} s",
                flush=True,
            )
            for name in ["import only", *args.steps]:
                r = results.setdefault(name, {})[scale] = measure(name, n, run)
                print(
                    f"  {name:12} {r['seconds']:8.2f} s wall {r['cpu_seconds']:8.2f} s CPU  "
                    f"peak RSS {r['peak_rss_mb']:7.0f} MB",
                    flush=True,
                )
    _print_growth(results, args.factor)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _print_growth(results: dict, f: int) -> None:
    base = {s: results["import only"][s]["peak_rss_mb"] for s in (1, f)}
    print(f"\ngrowth from 1x to {f}x (~{f} = linear); RSS counted over 'import only'")
    for name, r in results.items():
        if name == "import only":
            continue
        rss1, rssf = r[1]["peak_rss_mb"] - base[1], r[f]["peak_rss_mb"] - base[f]
        print(
            f"  {name:12} wall x{r[f]['seconds'] / r[1]['seconds']:5.1f}  "
            f"CPU x{r[f]['cpu_seconds'] / r[1]['cpu_seconds']:5.1f}  "
            f"RSS {rss1:6.0f} -> {rssf:6.0f} MB (x{rssf / max(rss1, 1):.1f})"
        )


if __name__ == "__main__":
    main()
