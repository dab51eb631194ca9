"""KV blocks a long Gemma 3 session holds with sliding-window reclaim vs every layer kept.

One agent-like session on the Gemma 3 270M shape (1 full-attention + 5 sliding-window KV groups,
window 512): each turn sends the whole history plus new tokens and generates a reply; turns run
one after another. The block pool and scheduler are the engine's own; the simulated runner stands
in for the model math, which does not change block counts (replies are --output tokens long).

    python benchmarks/hybrid_kv_blocks.py [--turns 24] [--new 700] [--output 64]

Prints, per mode, the peak pages held by requests (full / sliding / total), the pages in use at
the end of the last turn's prefill, and the ratio reclaim / keep-all.
"""

from __future__ import annotations

import argparse

import numpy as np

from harness.engine.config import EngineConfig
from harness.engine.engine import LLMEngine
from harness.engine.sequence import SamplingParams


def run_session(reclaim: bool, turns: int, new: int, output: int, budget: int) -> dict:
    config = EngineConfig(
        runner="simulated",
        sim_time_scale=0.0,
        preset="gemma3-270m",
        num_gpu_blocks=60_000,
        max_num_batched_tokens=budget,
        sliding_window_reclaim=reclaim,
    )
    engine = LLMEngine(config)
    rng = np.random.default_rng(0)
    history: list[int] = []
    for t in range(turns):
        history += rng.integers(300, 60_000, new).tolist()
        engine.add_request(f"turn{t}", history, SamplingParams(max_tokens=output, ignore_eos=True))
        while engine.has_unfinished():
            for out in engine.step():  # one request at a time: every output is its reply
                history += out.new_token_ids
    s = engine.stats()
    return {
        "context": len(history),
        "full": s.kv_blocks_full_peak,
        "sliding": s.kv_blocks_sliding_peak,
        "total": s.kv_blocks_full_peak + s.kv_blocks_sliding_peak,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=24)
    ap.add_argument("--new", type=int, default=700, help="new prompt tokens per turn")
    ap.add_argument("--output", type=int, default=64, help="reply tokens per turn")
    ap.add_argument("--budget", type=int, default=2048, help="max_num_batched_tokens")
    args = ap.parse_args()
    rows = {
        mode: run_session(mode == "reclaim", args.turns, args.new, args.output, args.budget)
        for mode in ("reclaim", "keep-all")
    }
    print(
        f"{'mode':<10} {'context':>8} {'full':>7} {'sliding':>8} {'total':>7}   (peak KV pages held)"
    )
    for mode, r in rows.items():
        print(f"{mode:<10} {r['context']:>8} {r['full']:>7} {r['sliding']:>8} {r['total']:>7}")
    print(f"reclaim / keep-all: {rows['reclaim']['total'] / rows['keep-all']['total']:.3f}")


if __name__ == "__main__":
    main()
