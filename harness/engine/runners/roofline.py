"""A roofline cost model: a step's time from a model's shape and a device's peaks, not a fit.

The simulated runner's step-time model for devices we do not have (`device: h200`, `sim_model:
llama-3.1-8b`, `tensor_parallel_size: 8`; the constants and their sources are
harness/data/roofline.yaml, listed in docs/engine.md). Per step, on each of the TP GPUs:

    compute = (2 * matmul params * tokens + flops_per_pair * attended pairs) / (TP * peak * e_c)
    memory  = (weight bytes read + KV bytes read + KV bytes written) / (TP * bandwidth * e_m)
    step_s  = overhead + max(compute, memory) + all-reduces

Prefill is compute-bound (thousands of tokens per weight read), decode memory-bound (weights
and every request's KV read for one token each). Matmul params are the active parameters less
the embedding lookup; a mixture of experts reads its shared weights plus the experts the step's
tokens touch (expected distinct experts of `tokens * experts_per_token` draws). KV reads: each
chunk reads its whole context once (sliding-window layers: at most the window). TP all-reduces:
two per layer, of the step's activations, ring-style. A simulated device is modelled, not
measured: the meta says so, and so does every report built on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from harness.engine.runners.cost_model import DEFAULT_TRANSFER, StepShape
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


@dataclass(frozen=True)
class RooflineCost:
    """A cost model with `CostModel`'s interface (step_seconds, transfer_seconds, meta)."""

    device_name: str
    model_name: str
    device: Device
    shape: Shape
    tp: int = 1
    compute_efficiency: float = 0.6
    memory_efficiency: float = 0.75
    step_overhead_s: float = 0.002
    allreduce_latency_s: float = 1e-5
    meta: dict = field(default_factory=dict)
    transfer: dict = field(default_factory=dict)

    @classmethod
    def of(cls, device: str, model: str, tp: int = 1) -> RooflineCost:
        c = constants()
        if device not in c["devices"]:
            raise EngineError(
                f"field 'device': no roofline preset {device!r} ({', '.join(devices())})"
            )
        if model not in c["models"]:
            raise EngineError(
                f"field 'sim_model': no roofline preset {model!r} ({', '.join(models())})"
            )
        eff = c["efficiency"]
        label = (
            f"{device} x{tp} roofline, {model}: modelled, not measured"
            if tp > 1
            else (f"{device} roofline, {model}: modelled, not measured")
        )
        return cls(
            device,
            model,
            Device(**c["devices"][device]),
            Shape(**c["models"][model]),
            tp,
            eff["compute"],
            eff["memory"],
            eff["step_overhead_s"],
            eff["allreduce_latency_s"],
            meta={"device": label, "roofline": True, "tensor_parallel_size": tp},
        )

    def step_seconds(self, shape: StepShape) -> float:
        return (
            self.step_overhead_s
            + max(self.compute_s(shape), self.memory_s(shape))
            + self.allreduce_s(shape)
        )

    def compute_s(self, shape: StepShape) -> float:
        s = self.shape
        flops = 2.0 * s.matmul_params * shape.tokens + s.flops_per_pair * shape.attended
        return flops / (self.tp * self.device.flops(s.dtype) * self.compute_efficiency)

    def memory_s(self, shape: StepShape) -> float:
        s = self.shape
        kv = (
            self.kv_read_tokens(shape) * s.kv_bytes_per_token_layer()
            + shape.tokens * s.kv_bytes_per_token
        )
        total = s.weight_bytes_read(shape.tokens) + kv
        return total / (self.tp * self.device.memory_gb_s * 1e9 * self.memory_efficiency)

    def kv_read_tokens(self, shape: StepShape) -> float:
        """Token-layers of KV the step reads: each chunk's context, per layer (a sliding layer
        at most its window)."""
        s = self.shape
        if not s.sliding_window:
            return s.layers * shape.context
        full = s.layers // s.full_attention_every
        window = min(shape.context, s.sliding_window * shape.chunks + shape.tokens)
        return full * shape.context + (s.layers - full) * window

    def allreduce_s(self, shape: StepShape) -> float:
        if self.tp == 1:
            return 0.0
        nbytes = shape.tokens * self.shape.hidden * 2  # bf16 activations
        ring = 2 * (self.tp - 1) / self.tp * nbytes / (self.device.link_gb_s * 1e9)
        return 2 * self.shape.layers * (self.allreduce_latency_s + ring)

    def transfer_seconds(self, moves: Mapping[tuple[str, str], int], page_bytes: int) -> float:
        total = 0.0
        for (tier, direction), blocks in moves.items():
            cost = {**DEFAULT_TRANSFER[tier], **self.transfer.get(tier, {})}
            gb_s = cost["write_gb_s" if direction == "in" else "read_gb_s"]
            total += blocks * (cost["latency_s"] + page_bytes / (gb_s * 1e9))
        return total

    def kv_bytes_per_block(self, block_size: int) -> int:
        return int(self.shape.kv_bytes_per_token * block_size)

    def kv_blocks(self, block_size: int, utilization: float = 0.9) -> int:
        """The KV pool the GPUs hold: `utilization` of their memory (vLLM's default
        --gpu-memory-utilization 0.9) less the weights, in blocks (activations not counted)."""
        free = self.tp * self.device.memory_gb * 1e9 * utilization - self.shape.weight_bytes
        if free <= 0:
            raise EngineError(
                f"{self.model_name} ({self.shape.weight_bytes / 1e9:.0f} GB of weights) does not "
                f"fit on {self.tp} x {self.device_name}: raise tensor_parallel_size"
            )
        return int(free // self.kv_bytes_per_block(block_size))
