"""`harness report RUN` against `harness analyze RUN`, in CPU seconds, measured in the same run.

    .venv/bin/python benchmarks/bench_report.py [RUN] [--repeats 5]

Both verbs run as the user runs them (`python -m harness ...`, a fresh process each), interleaved
(analyze, report, analyze, report, ...) so a change in the machine's load falls on both; each
is timed by the CPU its child process used (user + system, `getrusage(RUSAGE_CHILDREN)`), which
a busy machine inflates less than wall time. The report loads and analyses the run too, then
draws its figures and writes the page: the goal is report <= 2x analyze. Without RUN, a run of
scenarios/quickstart.yaml (20 s, the in-process engine) is made first in a temporary folder.
One untimed pair first: the first analyze writes records.parquet, which later loads read.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def harness(*args: str) -> float:
    """CPU seconds (user + system) of one `python -m harness ...`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # as installed: bytecode cached (PYTHONDONTWRITEBYTECODE would make every start compile the
    # harness's modules again, a cost both verbs pay and no user's install has)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [sys.executable, "-m", "harness", *args], check=True, env=env, stdout=subprocess.DEVNULL
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def make_run(folder: Path) -> Path:
    run = folder / "run"
    scenario = str(ROOT / "scenarios" / "quickstart.yaml")
    harness("run", scenario, "--set", "load.max_duration_s=20", "-o", str(run))
    return run


def measure(run: Path, repeats: int) -> list[tuple[float, float]]:
    page = run.parent / "bench-report.html"
    harness("analyze", str(run))  # untimed: writes records.parquet
    harness("report", str(run), "-o", str(page))
    pairs = []
    for _ in range(repeats):
        analyze = harness("analyze", str(run))
        report = harness("report", str(run), "-o", str(page))
        pairs.append((analyze, report))
        print(f"analyze {analyze:.2f} s  report {report:.2f} s  ratio {report / analyze:.2f}")
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", nargs="?", help="a run folder (default: make one)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run) if args.run else make_run(Path(tmp))
        pairs = measure(run, args.repeats)
    ratios = [r / a for a, r in pairs]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"report / analyze (CPU): median {statistics.median(ratios):.2f}x, "
        f"min {min(ratios):.2f}x, max {max(ratios):.2f}x over {len(ratios)} interleaved pairs; "
        f"analyze median {statistics.median(a for a, _ in pairs):.2f} s, report median "
        f"{statistics.median(r for _, r in pairs):.2f} s; load average {load} "
        f"on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
