"""The devices and model shapes the roofline knows (harness/data/roofline.yaml): a leaf table.

Read by the engine's config (which devices are rooflines, how many KV blocks one holds) and by
the roofline cost model (harness/engine/runners/roofline.py); it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from harness.errors import EngineError

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1}


@cache
def constants() -> dict:
    text = resources.files("harness").joinpath("data/roofline.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def devices() -> tuple[str, ...]:
    return tuple(constants()["devices"])


def models() -> tuple[str, ...]:
    return tuple(constants()["models"])


@dataclass(frozen=True)
class Shape:
    """A model as the roofline sees it (harness/data/roofline.yaml `models`)."""

    params_b: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype: str
    active_params_b: float | None = None
    experts: int = 0
    experts_per_token: int = 0
    kv_factor: int = 2  # K and V (MLA caches one shared latent: 1)
    attention_dims: int | None = None  # per head and pair: QK^T dims + PV dims (2 * head_dim)
    embedding_params_b: float | None = None
    sliding_window: int = 0
    full_attention_every: int = 1
    kv_dtype: str = "bfloat16"

    @property
    def weight_bytes(self) -> float:
        return self.params_b * 1e9 * BYTES[self.dtype]

    @property
    def matmul_params(self) -> float:
        active = self.active_params_b if self.active_params_b is not None else self.params_b
        embed = self.embedding_params_b
        return (active - (embed if embed is not None else self.vocab * self.hidden / 1e9)) * 1e9

    @property
    def flops_per_pair(self) -> float:
        """Attention FLOPs per (query, key) pair, all layers (a sliding layer's pairs beyond
        its window are counted too: an overestimate for long contexts on hybrid models)."""
        return 2.0 * self.heads * (self.attention_dims or 2 * self.head_dim) * self.layers

    def kv_bytes_per_token_layer(self) -> float:
        return self.kv_factor * self.kv_heads * self.head_dim * BYTES[self.kv_dtype]

    @property
    def kv_bytes_per_token(self) -> float:
        return self.layers * self.kv_bytes_per_token_layer()

    def weight_bytes_read(self, tokens: int) -> float:
        """Weights a step of `tokens` reads: all of a dense model; a MoE's shared part plus the
        experts its tokens touch (in expectation)."""
        if not self.experts or self.active_params_b is None:
            return self.weight_bytes
        e, k = self.experts, self.experts_per_token
        per_expert = (self.params_b - self.active_params_b) / (e - k)
        shared = self.active_params_b - k * per_expert
        touched = e * (1.0 - (1.0 - k / e) ** max(tokens, 1))
        return (shared + touched * per_expert) * 1e9 * BYTES[self.dtype]


@dataclass(frozen=True)
class Device:
    bf16_tflops: float
    fp8_tflops: float
    memory_gb: float
    memory_gb_s: float
    link_gb_s: float

    def flops(self, dtype: str) -> float:
        return (self.fp8_tflops if dtype == "fp8" else self.bf16_tflops) * 1e12


def device(name: str) -> Device:
    if name not in constants()["devices"]:
        raise EngineError(f"field 'device': no roofline preset {name!r} ({', '.join(devices())})")
    return Device(**constants()["devices"][name])


def shape(name: str) -> Shape:
    if name not in constants()["models"]:
        raise EngineError(f"field 'sim_model': no roofline preset {name!r} ({', '.join(models())})")
    return Shape(**constants()["models"][name])


def kv_blocks(
    device_name: str, model: str, tp: int, block_size: int, utilization: float = 0.9
) -> int:
    """The KV pool `tp` GPUs hold: `utilization` of their memory (vLLM's default
    --gpu-memory-utilization 0.9) less the weights, in blocks (activations not counted)."""
    s = shape(model)
    free = tp * device(device_name).memory_gb * 1e9 * utilization - s.weight_bytes
    if free <= 0:
        raise EngineError(
            f"{model} ({s.weight_bytes / 1e9:.0f} GB of weights) does not "
            f"fit on {tp} x {device_name}: raise tensor_parallel_size"
        )
    return int(free // int(s.kv_bytes_per_token * block_size))
