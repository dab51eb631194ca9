"""The torch runner: turns a scheduled step into one forward pass and samples the next tokens.

KV cache tensors are [group_size, num_pages, block_size, kv_heads, head_dim]: a page holds one KV
group's layers (all layers for a Llama preset, 3 for Gemma 3 270M), and a token's slot in its
group's pages is page_id * block_size + offset. Each KV group has its own block table; a sliding
window group's chunk reads only the window before it (masked to exactly `sliding_window` tokens).
The runner is also the block pool's KV mover (CPU tier copies).

`step_time_scale` slows every step on purpose (a regression to detect): after the forward pass and
the sampling, the runner sleeps `(step_time_scale - 1)` times the seconds they took.
"""

from __future__ import annotations

import time

import torch

from harness.engine.config import SLIDING, EngineConfig, KVGroup
from harness.engine.models.llama import DecodeGroup, ForwardBatch, GroupBatch, SeqSpan, build_model
from harness.engine.scheduler import ScheduledChunk
from harness.errors import EngineError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise EngineError(f"field 'device': {name!r} asked for but CUDA is not available")
    return torch.device(name)


def _window_mask(first: int, start: int, end: int, window: int, dev) -> torch.Tensor:
    """[queries, keys] True where key position k is in (q - window, q] for query position q."""
    q = torch.arange(start, end, device=dev)[:, None]
    k = torch.arange(first, end, device=dev)[None, :]
    return (k <= q) & (k > q - window)


def _build(p, seed: int, device: torch.device, dtype: torch.dtype):
    if p.arch == "gemma3":
        from harness.engine.models.gemma3 import build_gemma3

        return build_gemma3(p, device, dtype)
    return build_model(p, seed, device, dtype)


class TorchRunner:
    simulated = False

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.preset = config.model
        self.device = resolve_device(config.device)
        self.dtype = DTYPES[config.dtype]
        if self.device.type == "cpu" and self.dtype is not torch.float32:
            raise EngineError(
                f"field 'dtype': {config.dtype} is slow or unsupported on CPU; use float32"
            )
        self.model = _build(self.preset, config.seed, self.device, self.dtype)
        p, bs = self.preset, config.block_size
        shape = (p.group_size, config.total_blocks, bs, p.num_kv_heads, p.head_dim)
        try:
            self.k_cache = torch.zeros(shape, device=self.device, dtype=self.dtype)
            self.v_cache = torch.zeros(shape, device=self.device, dtype=self.dtype)
        except (RuntimeError, torch.OutOfMemoryError) as exc:
            raise EngineError(
                f"cannot allocate a KV cache of {config.total_blocks} blocks: {exc}"
            ) from exc
        self._gen = torch.Generator(device=self.device).manual_seed(config.seed)
        self.last_step_s = 0.0  # the last step's seconds: its compute plus the injected extra
        self.last_compute_s = 0.0
        self.last_extra_s = 0.0

    @property
    def device_name(self) -> str:
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        return "cpu"

    # ---- one step -----------------------------------------------------------------------

    def execute(self, chunks: list[ScheduledChunk]) -> dict[str, int]:
        """Run the step's chunks; the next token of every request whose chunk reaches its end."""
        if not chunks:
            return {}
        start = time.perf_counter()
        batch = self._build_batch(chunks)
        logits = self.model(batch, self.k_cache, self.v_cache)
        sampled = [c for c in chunks if c.samples]
        # `tolist()` waits for the device, so the clock below holds the whole step's compute
        tokens = self._sample(logits, [c.request.params.temperature for c in sampled])
        self._slow_down(time.perf_counter() - start)
        return {c.request.request_id: t for c, t in zip(sampled, tokens, strict=True)}

    def _slow_down(self, compute_s: float) -> None:
        """Sleep the injected share of the step (`step_time_scale` 1.3: 30 % of its compute)."""
        self.last_compute_s = compute_s
        self.last_extra_s = compute_s * (self.config.step_time_scale - 1.0)
        if self.last_extra_s > 0:
            time.sleep(self.last_extra_s)
        self.last_step_s = compute_s + self.last_extra_s

    def _build_batch(self, chunks: list[ScheduledChunk]) -> ForwardBatch:
        dev = self.device
        ids, positions, sample_index, offset = [], [], [], 0
        for c in chunks:
            end = c.start + c.num_tokens
            ids.extend(c.request.token_ids[c.start : end])
            positions.append(torch.arange(c.start, end))
            offset += c.num_tokens
            if c.samples:
                sample_index.append(offset - 1)
        return ForwardBatch(
            input_ids=torch.tensor(ids, dtype=torch.long, device=dev),
            positions=torch.cat(positions).to(dev),
            groups=[
                self._group_batch(chunks, g, group) for g, group in enumerate(self.preset.kv_groups)
            ],
            sample_index=torch.tensor(sample_index, dtype=torch.long, device=dev),
        )

    def _group_batch(self, chunks: list[ScheduledChunk], g: int, group: KVGroup) -> GroupBatch:
        dev, window = self.device, self.preset.sliding_window if group.kind == SLIDING else 0
        writes, spans, decodes, offset = [], [], [], 0
        for c in chunks:
            end = c.start + c.num_tokens
            # A sliding layer's chunk reads from the first key its first query sees.
            first = max(0, c.start - window + 1) if window else 0
            slots = self._slots(c.request.block_tables[g], first, end)
            writes.append(slots[c.start - first :])
            if c.num_tokens == 1:
                decodes.append((offset, slots))
            else:
                mask = _window_mask(first, c.start, end, window, dev) if window else None
                spans.append(SeqSpan(offset, c.num_tokens, slots.to(dev), mask))
            offset += c.num_tokens
        return GroupBatch(
            torch.cat(writes).to(dev), spans, self._decode_group(decodes) if decodes else None
        )

    def _slots(self, block_table: list[int], first: int, end: int) -> torch.Tensor:
        """Cache slots of positions [first, end) (their blocks are present in the table)."""
        bs = self.config.block_size
        lo = first // bs
        table = torch.tensor(block_table[lo : -(-end // bs)], dtype=torch.long)
        slots = (table[:, None] * bs + torch.arange(bs)[None, :]).flatten()
        return slots[first - lo * bs : end - lo * bs]

    def _decode_group(self, decodes: list[tuple[int, torch.Tensor]]) -> DecodeGroup:
        width = max(len(slots) for _, slots in decodes)
        padded = torch.zeros((len(decodes), width), dtype=torch.long)
        mask = torch.zeros((len(decodes), 1, 1, width), dtype=torch.bool)
        for i, (_, slots) in enumerate(decodes):
            padded[i, : len(slots)] = slots
            mask[i, ..., : len(slots)] = True
        index = torch.tensor([off for off, _ in decodes], dtype=torch.long)
        dev = self.device
        return DecodeGroup(index.to(dev), padded.flatten().to(dev), mask.to(dev))

    def _sample(self, logits: torch.Tensor, temperatures: list[float]) -> list[int]:
        if not temperatures:
            return []
        greedy = logits.argmax(dim=-1)
        if all(t == 0.0 for t in temperatures):
            return greedy.tolist()
        temps = torch.tensor([t if t > 0 else 1.0 for t in temperatures], device=logits.device)
        probs = torch.softmax(logits / temps[:, None], dim=-1)
        drawn = torch.multinomial(probs, 1, generator=self._gen)[:, 0]
        use_greedy = torch.tensor([t == 0.0 for t in temperatures], device=logits.device)
        return torch.where(use_greedy, greedy, drawn).tolist()

    # ---- KV mover for the tiers (CPU: host tensors; disk and store: their bytes) -----------

    def save_block(self, block_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k_cache[:, block_id].to("cpu", copy=True), self.v_cache[:, block_id].to(
            "cpu", copy=True
        )

    def load_block(self, block_id: int, payload: tuple[torch.Tensor, torch.Tensor]) -> None:
        k, v = payload
        self.k_cache[:, block_id].copy_(k)
        self.v_cache[:, block_id].copy_(v)

    def encode_block(self, payload: tuple[torch.Tensor, torch.Tensor]) -> bytes:
        """A page's K and V as raw bytes (any dtype, bfloat16 included: viewed as bytes)."""
        kv = torch.stack(payload).contiguous()
        return kv.view(-1).view(torch.uint8).numpy().tobytes()

    def decode_block(self, data: bytes) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (2, *self.k_cache[:, 0].shape)
        kv = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(self.dtype).view(shape)
        return kv[0], kv[1]
