"""Analyzing a big run, beside just parsing it, measured in the same run.

    .venv/bin/python benchmarks/bench_analysis.py [--records 1000000] [--json FILE]

Writes a synthetic run folder of N records (tasks of 3 main turns and one joined subagent, three
streamed chunks per reply, so the file stays a few hundred MB), then times, each in a fresh
subprocess so its peak RSS (`ru_maxrss`) is its own:
  - parse: `load_run` (records.jsonl -> DataFrame, manifest), the baseline;
  - analyze: `analyze_run` (parse + every metric + summary.json + HDR histograms).
The goal is analysis costing at most as much again as the parse: analyze/parse <= 2.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]

TASKS = {
    "import only": "pass",
    "parse (load_run)": "run = load_run(RUN)",
    "analyze (analyze_run)": "analyze_run(RUN)",
}

RUNNER = """
import json, resource, sys, time
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze_run
RUN = {run!r}
t0, c0 = time.perf_counter(), time.process_time()
{code}
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": rss}}))
"""


def write_run(path: Path, n_records: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    manifest = {
        "schema_version": 1,
        "run_id": "bench",
        "harness_version": "bench",
        "started_at": None,
        "ended_at": None,
        "status": "complete",
        "n_gpus": 8,
        "endpoints": ["e1", "e2"],
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    n_tasks = n_records // 4
    with (path / "records.jsonl").open("wb") as fh:
        for task in range(n_tasks):
            fh.write(b"".join(_task(task, rng)))


def _task(task: int, rng: np.random.Generator):
    t = float(rng.uniform(0, 3600))
    ttft = rng.lognormal(-1.5, 0.5, size=4)
    tpot = rng.lognormal(-4, 0.3, size=4)
    prompt = np.cumsum(rng.integers(500, 5000, size=4))
    for k, (sid, parent, turn) in enumerate(
        (
            (f"t{task}", None, 0),
            (f"t{task}.s", f"t{task}", 0),
            (f"t{task}", None, 1),
            (f"t{task}", None, 2),
        )
    ):
        first = t + float(ttft[k])
        times = [round(first + i * 8 * float(tpot[k]), 4) for i in range(3)]
        ideal = int(prompt[k] - 1) // 16 * 16 if turn else 0
        yield orjson.dumps(
            {
                "run_id": "bench",
                "request_id": f"{sid}-{turn}",
                "session_id": sid,
                "parent_session_id": parent,
                "agent": "sub" if parent else "main",
                "turn": turn,
                "endpoint": "e1" if k % 2 else "e2",
                "t_scheduled": round(t, 4),
                "t_sent": round(t, 4),
                "t_first_token": times[0],
                "t_last_token": times[-1],
                "t_done": round(times[-1] + 0.001, 4),
                "chunk_times": times,
                "chunk_tokens": [1, 12, 12],
                "prompt_tokens_expected": int(prompt[k]),
                "output_tokens_expected": 25,
                "cached_tokens_ideal": ideal,
                "prompt_tokens": int(prompt[k]),
                "completion_tokens": 25,
                "cached_tokens": ideal if k % 3 else ideal // 2,
                "status": "ok" if k or task % 50 else "timeout",
                "error": None,
                "phase": "measure",
            },
            option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY,
        )
        t = times[-1] + 0.5 if k != 1 else t


def measure(run: Path, code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", RUNNER.format(run=str(run), code=code)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        write_run(run, args.records)
        size_mb = (run / "records.jsonl").stat().st_size / 2**20
        print(
            f"wrote {args.records} records ({size_mb:.0f} MB) in {time.perf_counter() - t0:.1f} s"
        )
        results = {name: measure(run, code) for name, code in TASKS.items()}
    base = results["import only"]["peak_rss_mb"]
    parse, full = results["parse (load_run)"], results["analyze (analyze_run)"]
    for name, r in results.items():
        print(
            f"{name:24} {r['seconds']:8.2f} s wall {r['cpu_seconds']:8.2f} s CPU   peak RSS {r['peak_rss_mb']:6.0f} MB "
            f"({r['peak_rss_mb'] - base:+.0f} MB over import)"
        )
    ratios = {
        "wall time analyze/parse": full["seconds"] / parse["seconds"],
        "CPU time analyze/parse": full["cpu_seconds"] / parse["cpu_seconds"],
        "extra RSS analyze/parse (over import)": (full["peak_rss_mb"] - base)
        / (parse["peak_rss_mb"] - base),
    }
    for name, value in ratios.items():
        print(f"{name:40} {value:.2f}  (goal <= 2.0)")
    if args.json:
        args.json.write_text(
            json.dumps({"records": args.records, "results": results, "ratios": ratios}, indent=2)
        )


if __name__ == "__main__":
    main()
