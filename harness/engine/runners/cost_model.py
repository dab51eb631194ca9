"""The simulated runner's step-time model, and `calibrate`, which fits it to the torch runner.

    step_s = fixed + per_token * tokens + per_attended * (query, key) pairs + per_sample * samples

`tokens` drives the linear layers, attended pairs drive attention (a chunk of n tokens over s
cached ones attends n*s + n(n+1)/2 pairs), samples drive the LM head and sampling. The terms are
fitted by non-negative least squares on timed torch-runner steps of varied shapes.

KV moves between the device and its tiers add, per block, `latency_s + page_bytes / bandwidth`
(`transfer`: per tier, write bandwidth into it, read bandwidth back; `tiers.calibration`
measures the CPU copy and the disk on this machine; the remote store's default is documented in
docs/engine.md).
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

import numpy as np

from harness.engine.config import EngineConfig
from harness.engine.scheduler import ScheduledChunk
from harness.engine.sequence import Request, SamplingParams
from harness.errors import EngineError

DEFAULT_PATH = "default_cost_model.json"
# Per-block transfer costs when a cost model gives none. CPU and disk: measured by
# `tiers.calibration` on the development machine (default_cost_model.json holds the figures);
# remote: a store across a 100 Gb/s link, 12.5 GB/s, with 50 us per block of request overhead.
DEFAULT_TRANSFER = {
    "cpu": {"write_gb_s": 37.0, "read_gb_s": 41.8, "latency_s": 6.3e-6},
    "disk": {"write_gb_s": 0.37, "read_gb_s": 0.84, "latency_s": 9.7e-5},
    "remote": {"write_gb_s": 12.5, "read_gb_s": 12.5, "latency_s": 5e-5},
}


def transfer_seconds(
    transfer: Mapping[str, Mapping[str, float]],
    moves: Mapping[tuple[str, str], int],
    page_bytes: int,
) -> float:
    """Seconds to move `moves` blocks of `page_bytes` ((tier, "in"|"out") -> blocks) at the
    tiers' costs: `transfer`'s, else DEFAULT_TRANSFER's."""
    total = 0.0
    for (tier, direction), blocks in moves.items():
        cost = {**DEFAULT_TRANSFER[tier], **transfer.get(tier, {})}
        gb_s = cost["write_gb_s" if direction == "in" else "read_gb_s"]
        total += blocks * (cost["latency_s"] + page_bytes / (gb_s * 1e9))
    return total


@dataclass(frozen=True)
class StepShape:
    tokens: int
    attended: int
    samples: int
    context: int = 0  # the chunks' contexts (start + tokens), summed: KV a step reads (roofline)
    chunks: int = 0

    @classmethod
    def of(cls, chunks: list[ScheduledChunk]) -> StepShape:
        """One pass over the step's chunks (the simulated runner shapes every step)."""
        tokens = attended = samples = context = 0
        for c in chunks:
            n, start = c.num_tokens, c.start
            tokens += n
            attended += n * start + n * (n + 1) // 2
            samples += c.samples
            context += start + n
        return cls(tokens, attended, samples, context, len(chunks))

    @property
    def key(self) -> tuple[int, int, int]:
        """What a fitted `CostModel` prices: two shapes of one key cost the same."""
        return self.tokens, self.attended, self.samples

    def features(self) -> list[float]:
        return [1.0, float(self.tokens), float(self.attended), float(self.samples)]


@dataclass(frozen=True)
class CostModel:
    fixed_s: float
    per_token_s: float
    per_attended_s: float
    per_sample_s: float
    meta: dict = field(default_factory=dict)  # device, preset, dtype, fit quality
    # tier -> {"write_gb_s", "read_gb_s", "latency_s"}; a missing tier or key: DEFAULT_TRANSFER
    transfer: dict = field(default_factory=dict)

    @cached_property
    def _coef(self) -> np.ndarray:
        # once, not once a step: the simulated runner prices every step (same dot, same bits)
        return np.array((self.fixed_s, self.per_token_s, self.per_attended_s, self.per_sample_s))

    def step_seconds(self, shape: StepShape) -> float:
        return float(np.dot(self._coef, shape.features()))

    def transfer_seconds(self, moves: Mapping[tuple[str, str], int], page_bytes: int) -> float:
        """Seconds to move `moves` blocks of `page_bytes` ((tier, "in"|"out") -> blocks)."""
        return transfer_seconds(self.transfer, moves, page_bytes)

    @classmethod
    def load(cls, path: str | None = None) -> CostModel:
        try:
            if path is None:
                text = resources.files("harness.engine.runners").joinpath(DEFAULT_PATH).read_text()
            else:
                text = Path(path).read_text()
            d = json.loads(text)
            return cls(**d)
        except (OSError, ValueError, TypeError) as exc:
            raise EngineError(f"cost model {path or DEFAULT_PATH}: {exc}") from exc

    def save(self, path: str) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")


def _shapes(max_context: int) -> list[list[tuple[int, int]]]:
    """Steps to time: each a list of (cached start, chunk tokens) per request."""
    steps = []
    for start in sorted({0, max_context // 16, max_context // 4, max_context * 3 // 4}):
        for n in (64, 512, 2048):
            if start + n <= max_context:
                steps.append([(start, n)])
    for ctx in sorted({256, max_context // 8, max_context // 2}):
        for batch in (1, 8, 32):
            steps.append([(ctx, 1)] * batch)
    steps.append([(max_context // 4, 512)] + [(max_context // 8, 1)] * 8)  # a mixed step
    return steps


def _chunks(step: list[tuple[int, int]], block_size: int) -> list[ScheduledChunk]:
    rng = np.random.default_rng(0)
    chunks, next_block = [], 0
    for i, (start, n) in enumerate(step):
        tokens = rng.integers(1000, 32000, size=start + n).tolist()
        req = Request(f"cal-{i}", tokens, SamplingParams(max_tokens=1), 0.0)
        blocks = -(-(start + n) // block_size)
        req.block_tables = [list(range(next_block, next_block + blocks))]
        next_block += blocks
        chunks.append(ScheduledChunk(req, start, n))
    return chunks


def _time_step(runner, chunks: list[ScheduledChunk], reps: int) -> float:
    runner.execute(chunks)  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        runner.execute(chunks)
        if runner.device.type == "cuda":
            import torch

            torch.cuda.synchronize(runner.device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _transfer(runner, config: EngineConfig) -> dict:
    from harness.engine.tiers.calibration import cpu_cost, disk_cost

    page = config.model.kv_bytes_per_page(config.dtype, config.block_size)
    return {"cpu": cpu_cost(runner.k_cache), "disk": disk_cost(page, config.disk_offload_dir)}


def calibrate(
    config: EngineConfig, out_path: str, *, max_context: int = 20_480, reps: int = 3
) -> dict:
    """Time the torch runner on this device, fit the cost model, write it as JSON; return it."""
    from harness.engine.runners.torch_runner import TorchRunner

    max_context = min(max_context, config.model_len)
    steps = _shapes(max_context)
    need = max(sum(-(-(s + n) // config.block_size) for s, n in step) for step in steps)
    runner = TorchRunner(
        config.replace(runner="torch", num_gpu_blocks=need + 1, cpu_offload_blocks=0)
    )
    rows, ys = [], []
    for step in steps:
        chunks = _chunks(step, config.block_size)
        rows.append(StepShape.of(chunks).features())
        ys.append(_time_step(runner, chunks, reps))
    from scipy.optimize import nnls

    x, y = np.array(rows), np.array(ys)
    # Relative error is what matters (a 2 ms decode step as much as a 2 s prefill): weight by 1/y.
    coef, _ = nnls(x / y[:, None], np.ones_like(y))
    rel = np.abs(x @ coef - y) / y
    fixed, per_token, per_attended, per_sample = map(float, coef)  # StepShape.features' order
    model = CostModel(
        fixed,
        per_token,
        per_attended,
        per_sample,
        meta={
            "device": runner.device_name,
            "machine": platform.processor() or platform.machine(),
            "preset": config.preset,
            "dtype": config.dtype,
            "block_size": config.block_size,
            "steps_timed": len(steps),
            "median_rel_error": float(np.median(rel)),
            "max_rel_error": float(rel.max()),
        },
        transfer=_transfer(runner, config),
    )
    model.save(out_path)
    return asdict(model)
