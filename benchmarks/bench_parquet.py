"""Loading a run's records from records.parquet beside parsing records.jsonl, measured in the same run.

    .venv/bin/python benchmarks/bench_parquet.py [--records 1000000] [--repeat 3]

Writes the synthetic run of bench_analysis.py (N records, three streamed chunks each), brings
records.parquet up to date as `harness analyze` does, then times each load in a fresh subprocess
(best of --repeat), so neither benefits from the other's warm caches of Python objects:
  - JSON Lines: `read_records(records.jsonl)`, the baseline;
  - Parquet: `read_parquet(run)`, the same DataFrame (the round trip is tested);
  - `load_run(run)`, which picks the Parquet copy while it is up to date;
  - plain `pandas.read_parquet`, what a notebook that skips the loader would pay.
The goal: a million records load from Parquet in about a second; the ratio is JSON Lines / Parquet.
Last it prints `read_parquet`'s and `load_run`'s CPU and wall against `pandas.read_parquet` in the
same run (target: read_parquet <= 1.5x its CPU; docs/measurements/parquet.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analysis import write_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

TASKS = {
    "JSON Lines (read_records)": "read_records(RUN / 'records.jsonl')",
    "Parquet (read_parquet)": "read_parquet(RUN)",
    "load_run (picks Parquet)": "load_run(RUN, with_trace=False)",
    "pandas.read_parquet": "pd.read_parquet(RUN / 'records.parquet')",
}

RUNNER = """
import json, time
from pathlib import Path
import pandas as pd
from harness.analysis.parquet import read_parquet
from harness.analysis.records import read_records
from harness.analysis.loader import load_run
RUN = Path({run!r})
t0, c0 = time.perf_counter(), time.process_time()
{code}
print(json.dumps({{"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}}))
"""


def measure(run: Path, code: str, repeat: int) -> dict:
    """Best of `repeat` fresh processes, by wall time (CPU time beside it: the machine is shared)."""
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", RUNNER.format(run=str(run), code=code)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        times.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return min(times, key=lambda t: t["seconds"])


def main() -> None:
    from harness.analysis.parquet import save_records

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--run",
        type=Path,
        help="an existing run folder to reuse (kept), e.g. to "
        "interleave two checkouts on the same records; else a temporary one is written",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or Path(tmp) / "run"
        t0 = time.perf_counter()
        if not (run / "records.jsonl").is_file():
            write_run(run, args.records)
            print(f"wrote {args.records} records in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        save_records(run)
        sizes = {f: (run / f).stat().st_size / 2**20 for f in ("records.jsonl", "records.parquet")}
        print(
            f"records.parquet written in {time.perf_counter() - t0:.1f} s "
            f"({sizes['records.parquet']:.0f} MB; records.jsonl {sizes['records.jsonl']:.0f} MB)"
        )
        results = {name: measure(run, code, args.repeat) for name, code in TASKS.items()}
    base = results["JSON Lines (read_records)"]
    for name, r in results.items():
        print(
            f"{name:28} {r['seconds']:7.2f} s wall {r['cpu_seconds']:7.2f} s CPU   JSON Lines / this: "
            f"{base['seconds'] / r['seconds']:5.1f}x wall {base['cpu_seconds'] / r['cpu_seconds']:5.1f}x CPU"
        )
    plain = results["pandas.read_parquet"]
    for name in ("Parquet (read_parquet)", "load_run (picks Parquet)"):
        r = results[name]
        print(
            f"{name} / pandas.read_parquet: {r['cpu_seconds'] / plain['cpu_seconds']:.2f}x CPU "
            f"{r['seconds'] / plain['seconds']:.2f}x wall"
        )


if __name__ == "__main__":
    main()
