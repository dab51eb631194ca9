"""The torch runner: turns a scheduled step into one forward pass and samples the next tokens.

KV cache tensors are [layers, num_blocks, block_size, kv_heads, head_dim]; a token's slot is
block_id * block_size + offset. The runner is also the block pool's KV mover (CPU tier copies).
"""

from __future__ import annotations

import torch

from harness.engine.config import EngineConfig
from harness.engine.model import DecodeGroup, ForwardBatch, SeqSpan, build_model
from harness.engine.scheduler import ScheduledChunk
from harness.errors import EngineError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise EngineError(f"field 'device': {name!r} asked for but CUDA is not available")
    return torch.device(name)


class TorchRunner:
    simulated = False

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.preset = config.model
        self.device = resolve_device(config.device)
        self.dtype = DTYPES[config.dtype]
        if self.device.type == "cpu" and self.dtype is not torch.float32:
            raise EngineError(f"field 'dtype': {config.dtype} is slow or unsupported on CPU; use float32")
        self.model = build_model(self.preset, config.seed, self.device, self.dtype)
        p, bs = self.preset, config.block_size
        shape = (p.num_layers, config.total_blocks, bs, p.num_kv_heads, p.head_dim)
        try:
            self.k_cache = torch.zeros(shape, device=self.device, dtype=self.dtype)
            self.v_cache = torch.zeros(shape, device=self.device, dtype=self.dtype)
        except (RuntimeError, torch.OutOfMemoryError) as exc:
            raise EngineError(f"cannot allocate a KV cache of {config.total_blocks} blocks: {exc}") from exc
        self._gen = torch.Generator(device=self.device).manual_seed(config.seed)
        self.last_step_s = 0.0

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
        batch = self._build_batch(chunks)
        logits = self.model(batch, self.k_cache, self.v_cache)
        sampled = [c for c in chunks if c.samples]
        tokens = self._sample(logits, [c.request.params.temperature for c in sampled])
        return {c.request.request_id: t for c, t in zip(sampled, tokens, strict=True)}

    def _build_batch(self, chunks: list[ScheduledChunk]) -> ForwardBatch:
        dev = self.device
        ids, positions, writes, spans, decodes, sample_index, offset = [], [], [], [], [], [], 0
        for c in chunks:
            end = c.start + c.num_tokens
            ids.extend(c.request.token_ids[c.start:end])
            positions.append(torch.arange(c.start, end))
            slots = self._slots(c.request.block_table, end)
            writes.append(slots[c.start:])
            if c.num_tokens == 1:
                decodes.append((offset, slots))
            else:
                spans.append(SeqSpan(offset, c.num_tokens, slots.to(dev)))
            offset += c.num_tokens
            if c.samples:
                sample_index.append(offset - 1)
        return ForwardBatch(
            input_ids=torch.tensor(ids, dtype=torch.long, device=dev),
            positions=torch.cat(positions).to(dev),
            write_slots=torch.cat(writes).to(dev),
            spans=spans,
            decode=self._decode_group(decodes) if decodes else None,
            sample_index=torch.tensor(sample_index, dtype=torch.long, device=dev),
        )

    def _slots(self, block_table: list[int], length: int) -> torch.Tensor:
        bs = self.config.block_size
        table = torch.tensor(block_table, dtype=torch.long)
        return (table[:, None] * bs + torch.arange(bs)[None, :]).flatten()[:length]

    def _decode_group(self, decodes: list[tuple[int, torch.Tensor]]) -> DecodeGroup:
        width = max(len(slots) for _, slots in decodes)
        padded = torch.zeros((len(decodes), width), dtype=torch.long)
        mask = torch.zeros((len(decodes), 1, 1, width), dtype=torch.bool)
        for i, (_, slots) in enumerate(decodes):
            padded[i, :len(slots)] = slots
            mask[i, ..., :len(slots)] = True
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

    # ---- KV mover for the CPU tier ------------------------------------------------------

    def save_block(self, block_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k_cache[:, block_id].to("cpu", copy=True), self.v_cache[:, block_id].to("cpu", copy=True)

    def load_block(self, block_id: int, payload: tuple[torch.Tensor, torch.Tensor]) -> None:
        k, v = payload
        self.k_cache[:, block_id].copy_(k)
        self.v_cache[:, block_id].copy_(v)
