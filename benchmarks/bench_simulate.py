"""The virtual clock's cost against the requests it simulates, and its speed against real time.

    .venv/bin/python benchmarks/bench_simulate.py [--base 500] [--repeats 3] [--json FILE]
    .venv/bin/python benchmarks/bench_simulate.py --agentx [--base 1] [--repeats 3]

Replays the quickstart's load (`harness simulate scenarios/quickstart.yaml`: the simulated runner
on the virtual clock, one replica) at 1x, 4x and 16x `--base` requests (`load.max_requests`; a
duration far past them keeps the trace cycling), each point in a fresh subprocess, the sizes
interleaved per repeat. `--agentx` replays full-scale AgentX (scenarios/agentx-sim.yaml,
142k-token contexts) instead, scaled by whole sessions: 1x, 4x and 16x `--base` sessions
(`workload.sessions`, one closed-loop worker each), every session run to its end. The first N
sessions of a trace are the same whatever its length (harness.trace.strata), so each size holds
the smaller ones' sessions; their context lengths still differ by size (docs/measurements/simulate.md), so
compare CPU per prompt token too (the records' `prompt_tokens`) before reading the ratio. For each it times the replay alone (wall and CPU seconds: trace building, analysis and the report are
left out) and reads the simulated seconds from the manifest. Printed: per size, the median and
range over the repeats of wall seconds, wall milliseconds per request, and the speed-up
(simulated seconds / wall seconds). Cost grows linearly when ms per request stays flat from 1x
to 16x: the ratio 16x/1x of ms per request is printed last (1.0 = linear).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1, 4, 16)

POINT = """
import json, sys, time
from pathlib import Path
from harness.app.build import build_trace
from harness.app.commands.run import SIMULATE_SETS
from harness.app.runner import replay_point
from harness.app.scenario import load_scenario
sets = [*SIMULATE_SETS, *{sets!r}]
scenario = load_scenario({path!r}, sets)
trace = build_trace(scenario)
out = Path({out!r})
t0, c0 = time.perf_counter(), time.process_time()
replay_point(scenario, trace, out, show_progress=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
manifest = json.loads((out / "manifest.json").read_text())
n = manifest["counts"]["requests"]
print(json.dumps({{"requests": n, "wall_s": wall, "cpu_s": cpu, "sim_s": manifest["duration_s"]}}))
"""


QUICKSTART = "scenarios/quickstart.yaml"
AGENTX = "scenarios/agentx-sim.yaml"


def point_sets(agentx: bool, n: int) -> tuple[str, list[str]]:
    """The scenario and its overrides at size n (requests, or AgentX sessions)."""
    if agentx:
        return AGENTX, [f"workload.sessions={n}", f"load.concurrency={n}"]
    return QUICKSTART, ["load.max_duration_s=1e6", f"load.max_requests={n}"]


def point(agentx: bool, n: int, out: Path) -> dict:
    path, sets = point_sets(agentx, n)
    code = POINT.format(path=path, sets=sets, out=str(out))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(base: int, repeats: int, agentx: bool = False) -> dict[int, list[dict]]:
    results: dict[int, list[dict]] = {s: [] for s in SIZES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for s in SIZES:  # interleaved: the host's load falls on every size alike
                results[s].append(point(agentx, base * s, Path(tmp) / f"r{r}-x{s}"))
    return results


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def report(results: dict[int, list[dict]]) -> list[str]:
    lines = ["size  requests  wall s (median [range])  wall ms/request  cpu ms/request  speed-up"]
    per_req = {}
    for s, runs in results.items():
        ms = [1000 * r["wall_s"] / r["requests"] for r in runs]
        cpu = [1000 * r["cpu_s"] / r["requests"] for r in runs]
        per_req[s] = statistics.median(cpu)
        lines.append(
            f"{s:>3}x  {runs[0]['requests']:>8}  {_spread([r['wall_s'] for r in runs]):>22}"
            f"  {_spread(ms):>15}  {_spread(cpu):>14}"
            f"  {_spread([r['sim_s'] / r['wall_s'] for r in runs])}x"
        )
    lines.append(f"linearity: cpu ms/request at 16x / at 1x = {per_req[16] / per_req[1]:.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base", type=int, default=None, help="at 1x: requests (500), or AgentX sessions (1)"
    )
    parser.add_argument("--agentx", action="store_true", help="full-scale AgentX by sessions")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write the raw points here")
    args = parser.parse_args()
    base = args.base or (1 if args.agentx else 500)
    results = measure(base, args.repeats, args.agentx)
    print("\n".join(report(results)))
    if args.json is not None:
        args.json.write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
