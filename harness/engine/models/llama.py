"""A tiny Llama-style decoder (RMSNorm, RoPE, GQA, SwiGLU) over a paged KV cache.

Module names follow Hugging Face's LlamaForCausalLM, so `state_dict()` loads into it unchanged
(the throughput benchmark compares the two). Weights come from a seeded CPU generator and are
then moved, so a seed gives the same model on CPU and GPU.

Attention: the step's tokens are one flat batch for the linear layers; each request's chunk then
attends to its own KV, gathered from the paged cache by slot, with a bottom-right-aligned causal
mask (a chunk over a cached prefix sees the whole prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right

from harness.engine.config import ModelPreset


@dataclass
class SeqSpan:
    """One request's chunk in the flat batch and the cache slots of the context it attends to."""

    start: int  # index of the chunk's first token in the flat batch
    length: int
    context_slots: torch.Tensor  # [context] cache slots, the chunk's own tokens last
    mask: torch.Tensor | None = None  # [length, context] (sliding window); None = causal


@dataclass
class DecodeGroup:
    """Single-token chunks attended in one padded SDPA call (per-request calls dominate decode)."""

    index: torch.Tensor  # [B] their tokens' indices in the flat batch
    slots: torch.Tensor  # [B * max_context] cache slots, padded with slot 0
    mask: torch.Tensor  # [B, 1, 1, max_context] True where a slot is real context


@dataclass
class GroupBatch:
    """What one KV group's layers write and read this step (slots in that group's pages)."""

    write_slots: torch.Tensor  # [T] where each token's K/V goes
    spans: list[SeqSpan]  # multi-token chunks (prefill), attended one by one
    decode: DecodeGroup | None


@dataclass
class ForwardBatch:
    input_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    groups: list[GroupBatch]  # one per KV group (config.ModelPreset.kv_groups)
    sample_index: torch.Tensor  # [S] flat indices whose logits are needed


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype):
    inv_freq = 1.0 / theta ** (
        torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim
    )
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype)[:, None, :], emb.sin().to(dtype)[:, None, :]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def paged_attention(q, k, v, group: GroupBatch, k_cache, v_cache, scale: float | None = None):
    """Write the step's K/V into one layer's pages, then attend each chunk to its context.

    q: [T, heads, dim]; k, v: [T, kv_heads, dim]; k_cache, v_cache: [pages, block_size, kv_heads, dim].
    """
    kv_heads, dim = k.shape[1], k.shape[2]
    k_flat = k_cache.view(-1, kv_heads, dim)
    v_flat = v_cache.view(-1, kv_heads, dim)
    k_flat.index_copy_(0, group.write_slots, k)
    v_flat.index_copy_(0, group.write_slots, v)
    out = torch.empty_like(q)
    for span in group.spans:
        sl = slice(span.start, span.start + span.length)
        out[sl] = _attend(
            q[sl],
            k_flat.index_select(0, span.context_slots),
            v_flat.index_select(0, span.context_slots),
            span.mask,
            scale,
        )
    if group.decode is not None:
        out[group.decode.index] = _attend_decode(q, k_flat, v_flat, group.decode, scale)
    return out


def _attend(q, k, v, mask, scale) -> torch.Tensor:
    # [len, heads, dim] -> [1, heads, len, dim]; GQA by SDPA's own head grouping.
    q_len, kv_len = q.shape[0], k.shape[0]
    if mask is None and q_len > 1:
        mask = causal_lower_right(q_len, kv_len)
    o = F.scaled_dot_product_attention(
        q.transpose(0, 1)[None],
        k.transpose(0, 1)[None],
        v.transpose(0, 1)[None],
        attn_mask=mask,
        enable_gqa=True,
        scale=scale,
    )
    return o[0].transpose(0, 1)


def _attend_decode(q, k_flat, v_flat, group: DecodeGroup, scale) -> torch.Tensor:
    b, width = group.index.shape[0], group.mask.shape[-1]
    shape = (b, width, k_flat.shape[1], k_flat.shape[2])
    k = k_flat.index_select(0, group.slots).view(shape).transpose(1, 2)
    v = v_flat.index_select(0, group.slots).view(shape).transpose(1, 2)
    o = F.scaled_dot_product_attention(
        q[group.index][:, :, None], k, v, attn_mask=group.mask, enable_gqa=True, scale=scale
    )
    return o[:, :, 0]


class Attention(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.p = p
        self.q_proj = nn.Linear(p.hidden_size, p.num_heads * p.head_dim, bias=False)
        self.k_proj = nn.Linear(p.hidden_size, p.num_kv_heads * p.head_dim, bias=False)
        self.v_proj = nn.Linear(p.hidden_size, p.num_kv_heads * p.head_dim, bias=False)
        self.o_proj = nn.Linear(p.num_heads * p.head_dim, p.hidden_size, bias=False)

    def forward(self, x, cos, sin, batch: ForwardBatch, k_cache, v_cache) -> torch.Tensor:
        p, t = self.p, x.shape[0]
        q = apply_rope(self.q_proj(x).view(t, p.num_heads, p.head_dim), cos, sin)
        k = apply_rope(self.k_proj(x).view(t, p.num_kv_heads, p.head_dim), cos, sin)
        v = self.v_proj(x).view(t, p.num_kv_heads, p.head_dim)
        out = paged_attention(q, k, v, batch.groups[0], k_cache, v_cache)
        return self.o_proj(out.view(t, -1))


class MLP(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(p.hidden_size, p.intermediate_size, bias=False)
        self.up_proj = nn.Linear(p.hidden_size, p.intermediate_size, bias=False)
        self.down_proj = nn.Linear(p.intermediate_size, p.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.self_attn = Attention(p)
        self.mlp = MLP(p)
        self.input_layernorm = RMSNorm(p.hidden_size, p.rms_eps)
        self.post_attention_layernorm = RMSNorm(p.hidden_size, p.rms_eps)

    def forward(self, h, cos, sin, batch, k_cache, v_cache) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h), cos, sin, batch, k_cache, v_cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaBody(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(p.vocab_size, p.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(p) for _ in range(p.num_layers))
        self.norm = RMSNorm(p.hidden_size, p.rms_eps)


class TinyLlama(nn.Module):
    def __init__(self, p: ModelPreset) -> None:
        super().__init__()
        self.p = p
        self.model = LlamaBody(p)
        self.lm_head = nn.Linear(p.hidden_size, p.vocab_size, bias=False)

    @torch.inference_mode()
    def forward(
        self, batch: ForwardBatch, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        """Logits [S, vocab] at batch.sample_index; K/V of every token written to the cache."""
        h = self.model.embed_tokens(batch.input_ids)
        cos, sin = rope_cos_sin(batch.positions, self.p.head_dim, self.p.rope_theta, h.dtype)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, batch, k_cache[i], v_cache[i])
        return self.lm_head(self.model.norm(h[batch.sample_index])).float()


def build_model(p: ModelPreset, seed: int, device: torch.device, dtype: torch.dtype) -> TinyLlama:
    """Seeded weights drawn on the CPU (identical on every device), then moved."""
    with torch.device("meta"):
        model = TinyLlama(p)
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, param in model.state_dict().items():
        if name.endswith("norm.weight"):
            state[name] = torch.ones(param.shape)
        else:
            # std 1/sqrt(fan_in) keeps activations O(1) through the layers; logits stay spread
            # out, so greedy argmax is far from ties and exact across batchings.
            fan_in = param.shape[-1] if not name.endswith("embed_tokens.weight") else 1
            state[name] = torch.randn(param.shape, generator=gen) / fan_in**0.5
    model = model.to_empty(device="cpu")
    model.load_state_dict(state)
    return model.to(device=device, dtype=dtype).eval()
