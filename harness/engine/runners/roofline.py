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

from harness.engine import devices
from harness.engine.devices import Device, Shape
from harness.engine.runners.cost_model import StepShape, transfer_seconds


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
        eff = devices.constants()["efficiency"]
        label = (
            f"{device} x{tp} roofline, {model}: modelled, not measured"
            if tp > 1
            else (f"{device} roofline, {model}: modelled, not measured")
        )
        return cls(
            device,
            model,
            devices.device(device),
            devices.shape(model),
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
        return transfer_seconds(self.transfer, moves, page_bytes)

    def kv_bytes_per_block(self, block_size: int) -> int:
        return int(self.shape.kv_bytes_per_token * block_size)
