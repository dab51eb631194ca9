"""Trace tools at corpus scale: `trace stats` and `convert --to mooncake` on a Weka/AgentX corpus,
beside another checkout (e.g. main) measured in the same run.

    .venv/bin/python benchmarks/bench_corpus.py [--sessions 800] [--corpus DIR] [--cache-tokens 10000000]
        [--baseline-root /work/main] [--baseline-traces 100] [--json FILE]

Without `--corpus` it builds a full-scale corpus: `trace generate` of a full-scale AgentX
trace (`--sessions` main sessions, ~60k requests, median prompt ~140k tokens), then
`convert --to weka` into a directory of one-trace files. Each measurement is the harness CLI in
a fresh subprocess, reporting its wall time, CPU time (user + sys: a shared machine stretches
wall time) and peak RSS. The baseline checkout runs the same commands on the first
`--baseline-traces` traces as one JSON Lines file (older code reads no directories), and so does
this checkout, so the ratio compares like with like; this checkout also runs the whole corpus.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNNER = """
import json, resource, sys, time
sys.argv = ["harness", *{argv!r}]
t0 = time.perf_counter()
from harness.app.cli import main
rc = main(sys.argv[1:])
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"rc": rc, "wall_s": time.perf_counter() - t0, "cpu_s": u.ru_utime + u.ru_stime,
                  "rss_mib": u.ru_maxrss / 1024}}), file=sys.stderr)
"""


def harness(root: Path, *argv: str, stdout=subprocess.DEVNULL) -> dict:
    """Run `harness ARGV` from checkout `root` in a fresh process; its wall, CPU and peak RSS."""
    code = RUNNER.format(argv=list(argv))
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    return json.loads(out.stderr.strip().splitlines()[-1])


def build_corpus(tmp: Path, sessions: int) -> Path:
    native, corpus = tmp / "agentx.jsonl", tmp / "weka"
    harness(
        ROOT, "trace", "generate", "--sessions", str(sessions), "--seed", "1", "-o", str(native)
    )
    harness(ROOT, "trace", "convert", str(native), "--to", "weka", "-o", str(corpus))
    return corpus


def subset(corpus: Path, n: int, out: Path) -> Path:
    with out.open("wb") as fh:
        for f in sorted(corpus.glob("*.json"))[:n]:
            fh.write(f.read_bytes().rstrip() + b"\n")
    return out


def tools(root: Path, trace: Path, tmp: Path, cache_tokens: int) -> dict:
    stats = harness(
        root, "trace", "stats", str(trace), "--json", "--cache-tokens", str(cache_tokens)
    )
    convert = harness(
        root,
        "trace",
        "convert",
        str(trace),
        "--to",
        "mooncake",
        "--block-size",
        "512",
        "-o",
        str(tmp / "out.mooncake.jsonl"),
    )
    return {"stats": stats, "convert": convert}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sessions",
        type=int,
        default=800,
        help="main sessions of the generated corpus (default 800)",
    )
    ap.add_argument(
        "--corpus", type=Path, default=None, help="an existing Weka/AgentX corpus directory"
    )
    ap.add_argument(
        "--cache-tokens",
        type=int,
        default=10_000_000,
        help="the LRU size of `trace stats` (default 1e7)",
    )
    ap.add_argument(
        "--baseline-root",
        type=Path,
        default=None,
        help="another checkout to measure beside this one",
    )
    ap.add_argument(
        "--baseline-traces",
        type=int,
        default=100,
        help="traces of the side-by-side subset (default 100)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    try:
        corpus = args.corpus or build_corpus(tmp, args.sessions)
        results = {"corpus": str(corpus), "full": tools(ROOT, corpus, tmp, args.cache_tokens)}
        if args.baseline_root is not None:
            part = subset(corpus, args.baseline_traces, tmp / "subset.jsonl")
            results["subset_traces"] = args.baseline_traces
            results["subset"] = tools(ROOT, part, tmp, args.cache_tokens)
            results["subset_baseline"] = tools(args.baseline_root, part, tmp, args.cache_tokens)
        print(f"{'run':34} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13}")
        for name in ("full", "subset", "subset_baseline"):
            for tool, r in results.get(name, {}).items():
                print(
                    f"{name + ' ' + tool:34} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['rss_mib']:>13.0f}"
                )
        if "subset_baseline" in results:
            for tool in ("stats", "convert"):
                ratio = results["subset_baseline"][tool]["cpu_s"] / results["subset"][tool]["cpu_s"]
                print(
                    f"{tool}: this checkout {ratio:.1f}x less CPU than the baseline on the same subset"
                )
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
