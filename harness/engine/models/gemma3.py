"""Gemma 3 (text) over the paged KV cache: Google's Gemma 3 270M, written here from its design.

What differs from the Llama decoder in model.py (and what transformers' Gemma3ForCausalLM does,
which the tests compare against token for token):
- RMSNorm scales by (1 + weight), computed in float32;
- four norms per layer: before and after attention, before and after the MLP;
- query and key norms (RMSNorm over head_dim) before RoPE; scores scaled by
  query_pre_attn_scalar^-0.5 (= head_dim^-0.5 here);
- GeGLU MLP with tanh-approximate GELU;
- 5 sliding-window layers (window 512: a token sees itself and the 511 before it) per
  full-attention layer, with RoPE bases 10k (sliding) and 1M (full);
- embeddings scaled by sqrt(hidden_size) (in the weights' dtype); output tied to the embeddings.

Module names are Hugging Face's, so the same state dict loads into both models.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.engine.config import FULL, SLIDING, ModelPreset
from harness.engine.models.llama import ForwardBatch, apply_rope, paged_attention, rope_cos_sin


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).to(x.dtype)


class GemmaAttention(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.p = p
        self.q_proj = nn.Linear(p.hidden_size, p.num_heads * p.head_dim, bias=False)
        self.k_proj = nn.Linear(p.hidden_size, p.num_kv_heads * p.head_dim, bias=False)
        self.v_proj = nn.Linear(p.hidden_size, p.num_kv_heads * p.head_dim, bias=False)
        self.o_proj = nn.Linear(p.num_heads * p.head_dim, p.hidden_size, bias=False)
        self.q_norm = GemmaRMSNorm(p.head_dim, p.rms_eps)
        self.k_norm = GemmaRMSNorm(p.head_dim, p.rms_eps)

    def forward(self, x, rope, group, k_cache, v_cache) -> torch.Tensor:
        p, t = self.p, x.shape[0]
        cos, sin = rope
        q = apply_rope(self.q_norm(self.q_proj(x).view(t, p.num_heads, p.head_dim)), cos, sin)
        k = apply_rope(self.k_norm(self.k_proj(x).view(t, p.num_kv_heads, p.head_dim)), cos, sin)
        v = self.v_proj(x).view(t, p.num_kv_heads, p.head_dim)
        out = paged_attention(q, k, v, group, k_cache, v_cache, scale=p.head_dim**-0.5)
        return self.o_proj(out.view(t, -1))


class GemmaMLP(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(p.hidden_size, p.intermediate_size, bias=False)
        self.up_proj = nn.Linear(p.hidden_size, p.intermediate_size, bias=False)
        self.down_proj = nn.Linear(p.intermediate_size, p.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class GemmaDecoderLayer(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.self_attn = GemmaAttention(p)
        self.mlp = GemmaMLP(p)
        self.input_layernorm = GemmaRMSNorm(p.hidden_size, p.rms_eps)
        self.post_attention_layernorm = GemmaRMSNorm(p.hidden_size, p.rms_eps)
        self.pre_feedforward_layernorm = GemmaRMSNorm(p.hidden_size, p.rms_eps)
        self.post_feedforward_layernorm = GemmaRMSNorm(p.hidden_size, p.rms_eps)

    def forward(self, h, rope, group, k_cache, v_cache) -> torch.Tensor:
        a = self.self_attn(self.input_layernorm(h), rope, group, k_cache, v_cache)
        h = h + self.post_attention_layernorm(a)
        return h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))


class GemmaBody(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(p.vocab_size, p.hidden_size)
        self.layers = nn.ModuleList(GemmaDecoderLayer(p) for _ in range(p.num_layers))
        self.norm = GemmaRMSNorm(p.hidden_size, p.rms_eps)


class Gemma3(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.p = p
        self.model = GemmaBody(p)
        # layer -> (its KV group, its index inside the group's pages)
        self.placement = {
            layer: (g, i)
            for g, group in enumerate(p.kv_groups)
            for i, layer in enumerate(group.layers)
        }

    @torch.inference_mode()
    def forward(
        self, batch: ForwardBatch, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        """Logits [S, vocab] at batch.sample_index; K/V of every token written to the cache."""
        p, embed = self.p, self.model.embed_tokens
        h = embed(batch.input_ids) * torch.tensor(p.hidden_size**0.5, dtype=embed.weight.dtype)
        ropes = {
            FULL: rope_cos_sin(batch.positions, p.head_dim, p.rope_theta, h.dtype),
            SLIDING: rope_cos_sin(batch.positions, p.head_dim, p.rope_local_theta, h.dtype),
        }
        kinds = p.layer_kinds
        for i, layer in enumerate(self.model.layers):
            g, j = self.placement[i]
            h = layer(h, ropes[kinds[i]], batch.groups[g], k_cache[j], v_cache[j])
        out = self.model.norm(h[batch.sample_index])
        return F.linear(out, embed.weight).float()


def build_gemma3(p: ModelPreset, device: torch.device, dtype: torch.dtype) -> Gemma3:
    """The model with the GGUF package's dequantized weights (see gguf_weights.py)."""
    from harness.engine.models.gguf_weights import load_state_dict

    with torch.device("meta"):
        model = Gemma3(p)
    model.load_state_dict(load_state_dict(), assign=True)
    return model.to(device=device, dtype=dtype).eval()
