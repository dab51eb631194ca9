"""Reference-engine benchmarks (a script, not a test): warm-turn TTFT, throughput beside Hugging
Face transformers, and a full-scale simulated AgentX replay.

    .venv/bin/python benchmarks/bench_engine.py [--only warm|hf|sim] [--out results.json]

Every figure is measured in this run against a baseline from the same run (cold vs warm prompt,
transformers vs the engine); on a shared machine, timings are noisy and each figure says so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

from harness.engine.config import PRESETS, EngineConfig
from harness.engine.engine import LLMEngine
from harness.engine.sequence import SamplingParams


def prompt(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(1000, 32000, n).tolist()


def ttft(engine: LLMEngine, rid: str, ids: list[int]) -> float:
    """Seconds from adding the request to the end of the step that produced its first token."""
    t0 = time.perf_counter()
    engine.add_request(rid, ids, SamplingParams(max_tokens=1, ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
    return time.perf_counter() - t0


# ---- warm-turn speedup ------------------------------------------------------------------------


def warm_turn(n: int, reps: int, budget: int) -> dict:
    bs, cached_fraction = 16, 0.96
    cfg = EngineConfig(
        device="cpu", num_gpu_blocks=(reps + 1) * 2 * n // bs + 64, max_num_batched_tokens=budget
    )
    engine = LLMEngine(cfg)
    cold, warm, cached = [], [], 0
    for r in range(reps):
        cold.append(ttft(engine, f"cold{r}", prompt(100 + r, n)))
        turn = prompt(200 + r, n)
        ttft(engine, f"prev{r}", turn[: int(cached_fraction * n)])  # the previous turn's prompt
        t0 = time.perf_counter()
        engine.add_request(f"warm{r}", turn, SamplingParams(max_tokens=1, ignore_eos=True))
        while engine.has_unfinished():
            for out in engine.step():
                cached = out.cached_tokens
        warm.append(time.perf_counter() - t0)
    new = n - cached
    return {
        "prompt_tokens": n,
        "cached_tokens": cached,
        "max_num_batched_tokens": budget,
        "ttft_cold_s": min(cold),
        "ttft_warm_s": min(warm),
        "speedup": min(cold) / min(warm),
        "ideal_linear_speedup": n / new,
        "ideal_attention_speedup": (n * (n + 1) / 2) / (new * cached + new * (new + 1) / 2),
        "reps": reps,
        "statistic": "min over reps",
    }


# ---- throughput beside transformers ---------------------------------------------------------


def hf_model(preset: str, ours: torch.nn.Module):
    from transformers import LlamaConfig, LlamaForCausalLM

    p = PRESETS[preset]
    cfg = LlamaConfig(
        vocab_size=p.vocab_size,
        hidden_size=p.hidden_size,
        intermediate_size=p.intermediate_size,
        num_hidden_layers=p.num_layers,
        num_attention_heads=p.num_heads,
        num_key_value_heads=p.num_kv_heads,
        head_dim=p.head_dim,
        max_position_embeddings=p.max_model_len,
        rope_theta=p.rope_theta,
        rms_norm_eps=p.rms_eps,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(cfg).eval()
    model.load_state_dict(ours.state_dict(), strict=True)  # same module names, same weights
    return model


def throughput(batch: int, prompt_len: int, new_tokens: int, engine: LLMEngine, hf) -> dict:
    prompts = [prompt(1000 + i, prompt_len) for i in range(batch)]
    t0 = time.perf_counter()
    for i, p in enumerate(prompts):
        engine.add_request(
            f"b{batch}-{i}", p, SamplingParams(max_tokens=new_tokens, ignore_eos=True)
        )
    ours: dict[str, list[int]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            ours.setdefault(out.request_id, []).extend(out.new_token_ids)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.inference_mode():
        gen = hf.generate(
            torch.tensor(prompts),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
        )
    t_hf = time.perf_counter() - t0
    same = sum(gen[i, prompt_len:].tolist() == ours[f"b{batch}-{i}"] for i in range(batch))
    return {
        "batch": batch,
        "prompt_tokens": prompt_len,
        "new_tokens": new_tokens,
        "engine_tok_s": batch * new_tokens / t_ours,
        "transformers_tok_s": batch * new_tokens / t_hf,
        "engine_over_transformers": t_hf / t_ours,
        "identical_outputs": f"{same}/{batch}",
    }


def bench_hf(batches: list[int], prompt_len: int, new_tokens: int) -> list[dict]:
    cfg = EngineConfig(
        device="cpu",
        num_gpu_blocks=max(batches) * (prompt_len + new_tokens) // 16 + 64,
        max_num_seqs=max(batches),
        max_num_batched_tokens=8192,
    )
    engine = LLMEngine(cfg)
    hf = hf_model(cfg.preset, engine.runner.model)
    throughput(2, 32, 4, engine, hf)  # warm-up both
    return [throughput(b, prompt_len, new_tokens, engine, hf) for b in batches]


# ---- simulated full-scale AgentX replay -----------------------------------------------------


def prompt_ids(content, sid: str, k: int) -> np.ndarray:
    """The prompt as one int array (the engine takes arrays: no 142k-element list round trip)."""
    return np.concatenate([content.segment_token_ids(s) for s in content.segments(sid, k)])


async def replay_sim(sessions: int, num_blocks: int) -> dict:
    from harness.serving.async_engine import AsyncEngine
    from harness.trace.content import Content
    from harness.trace.generate import generate
    from harness.trace.prefix import IdealPrefixCache
    from harness.trace.profile import load_profile

    trace = generate(load_profile(), seed=1, sessions=sessions)
    content, ideal = Content(trace), IdealPrefixCache(16)
    cfg = EngineConfig(
        runner="simulated",
        sim_time_scale=0.0,
        num_gpu_blocks=num_blocks,
        max_num_seqs=64,
        max_num_batched_tokens=8192,
        max_model_len=600_000,
    )
    engine = AsyncEngine(cfg)
    await engine.start()
    rows: list[tuple[int, int, int]] = []  # prompt tokens, cached, ideal
    t0 = time.perf_counter()

    async def run_session(sid: str) -> None:
        s = trace.session(sid)
        for k, turn in enumerate(s.turns):
            ids = await asyncio.to_thread(prompt_ids, content, sid, k)
            ideal_hit = ideal.observe(content.segments(sid, k))
            params = SamplingParams(max_tokens=turn.output_tokens, ignore_eos=True)
            final = [o async for o in engine.generate(f"{sid}/{k}", ids, params)][-1]
            rows.append((final.prompt_tokens, final.cached_tokens, ideal_hit))
            if len(rows) % 250 == 0:
                print(
                    f"sim replay: {len(rows)} requests, {time.perf_counter() - t0:.0f} s",
                    file=sys.stderr,
                )
            if turn.spawns:  # subagents start when this turn ends; the next turn joins them
                await asyncio.gather(*(run_session(c) for c in turn.spawns))

    await asyncio.gather(*(run_session(s.id) for s in trace.main_sessions))
    wall = time.perf_counter() - t0
    stats = engine.stats()
    modelled = engine.engine.runner.sim_time_s
    await engine.stop()
    prompt_total = sum(r[0] for r in rows)
    return {
        "main_sessions": sessions,
        "sessions": len(trace.sessions),
        "requests": len(rows),
        "prompt_tokens": prompt_total,
        "median_prompt_tokens": statistics.median(r[0] for r in rows),
        "wall_s": wall,
        "modelled_engine_s": modelled,
        "steps": stats.num_steps,
        "num_gpu_blocks": num_blocks,
        "preemptions": stats.num_preemptions,
        "cache_hit_rate": sum(r[1] for r in rows) / prompt_total,
        "ideal_hit_rate": sum(r[2] for r in rows) / prompt_total,
        "note": "all main sessions start at once, no think time; wall_s is the engine's own "
        "bookkeeping + content materialization (sim_time_scale=0)",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["warm", "hf", "sim"], action="append")
    ap.add_argument("--out", help="also write the results as JSON here")
    ap.add_argument("--warm-lengths", type=int, nargs="+", default=[8192, 16384])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument(
        "--sim-blocks",
        type=int,
        default=524_288,
        help="device KV blocks of the simulated server (default: 8M tokens, the working set fits)",
    )
    args = ap.parse_args(argv)
    parts = args.only or ["warm", "hf", "sim"]
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": sys.version.split()[0],
            "caveat": "shared machine: timings are noisy",
        }
    }
    if "warm" in parts:
        result["warm_turn"] = [warm_turn(n, args.reps, 2048) for n in args.warm_lengths]
    if "hf" in parts:
        result["throughput"] = bench_hf([1, 8, 32], prompt_len=256, new_tokens=64)
    if "sim" in parts:
        result["sim_replay"] = asyncio.run(replay_sim(args.sessions, args.sim_blocks))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
