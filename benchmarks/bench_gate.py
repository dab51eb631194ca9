"""The regression gate on this machine's real noise: false alarms and detections, counted.

    .venv/bin/python benchmarks/bench_gate.py [--same 4] [--starved 2] [--slow 0] [--duration 40]
        [--fail-on 'ttft_p90:+10%,tpgs:-5%,cache_hit_rate:-0.02'] [--keep DIR]

Runs the quickstart scenario back to back: `--same` times as shipped (only the duration set),
`--starved` times with `max_num_batched_tokens=32` (a starved engine), and `--slow` times on the
simulated runner with `sim_time_scale` 1.3 beside as many simulated runs at 1.0 (+30 % model
time). Then `harness compare --fail-on` on every pair: a same-configuration pair that fails is a
false alarm, a regressed pair that passes a missed detection; 2 vs 2 repeats too. Prints each
pair's exit code and the rates with their counts.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from harness.analysis.compare.verdict import compare_runs
from harness.app.cli import main as harness

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "scenarios" / "quickstart.yaml")
STARVED = ["--set", "target.engine.options.max_num_batched_tokens=32"]
SIM = ["--set", "target.engine.options.runner=simulated"]


def run(out: Path, duration: float, extra: list[str]) -> Path:
    t0 = time.perf_counter()
    args = ["run", QUICKSTART, "-o", str(out), "--set", f"load.max_duration_s={duration}", *extra]
    code = harness(args)
    print(f"  {out.name}: exit {code}, {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def judge(base: list[Path], cand: list[Path], fail_on: str) -> int:
    result = compare_runs(base, cand, fail_on=fail_on)
    label = f"{'+'.join(p.name for p in base)} vs {'+'.join(p.name for p in cand)}"
    print(f"  {label}: exit {result.exit_code} {'; '.join(result.failures)}", flush=True)
    return result.exit_code


def pairs_of(runs: list[Path]) -> list[tuple[list[Path], list[Path]]]:
    singles = [([a], [b]) for a, b in itertools.combinations(runs, 2)]
    repeats = []
    if len(runs) >= 4:
        for left in itertools.combinations(runs, 2):
            right = [r for r in runs if r not in left][:2]
            if left < tuple(right):
                repeats.append((list(left), right))
    return singles + repeats


def rate(name: str, codes: list[int], want: int) -> None:
    hits = sum(c == want for c in codes)
    share = f"{hits / len(codes):.0%}" if codes else "n/a"
    print(f"{name}: {hits} of {len(codes)} ({share})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--same", type=int, default=4)
    ap.add_argument("--starved", type=int, default=2)
    ap.add_argument("--slow", type=int, default=0)
    ap.add_argument("--duration", type=float, default=40)
    ap.add_argument("--fail-on", default="ttft_p90:+10%,tpgs:-5%,cache_hit_rate:-0.02")
    ap.add_argument("--keep", default=None, help="write the runs here (default: a temp folder)")
    args = ap.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="bench-gate-"))
    print(f"runs under {root}")
    same = [run(root / f"same{i}", args.duration, []) for i in range(args.same)]
    starved = [run(root / f"starved{i}", args.duration, STARVED) for i in range(args.starved)]
    sim = [run(root / f"sim{i}", args.duration, SIM) for i in range(args.slow)]
    slow = [
        run(
            root / f"slow{i}",
            args.duration,
            [*SIM, "--set", "target.engine.options.sim_time_scale=1.3"],
        )
        for i in range(args.slow)
    ]
    print("same configuration (a failure is a false alarm):")
    alarms = [judge(b, c, args.fail_on) for b, c in pairs_of(same) + pairs_of(sim)]
    print("regressed (a pass is a missed detection):")
    found = [judge([b], [c], args.fail_on) for b in same for c in starved]
    found += [judge([b], [c], args.fail_on) for b in sim for c in slow]
    rate("false alarms (same-configuration pairs that failed)", alarms, 1)
    rate("detections (regressed pairs that failed)", found, 1)


if __name__ == "__main__":
    main()
