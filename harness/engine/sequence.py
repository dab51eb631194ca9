"""One request's state inside the engine: its tokens, how many are computed, its KV blocks."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

import numpy as np

from harness.engine.config import EOS_ID

NULL_BLOCK = -1  # a sliding-window block given back: its position is outside every window
TOKEN_BYTES = 4  # token ids as little-endian int32: what block hashes and hit checks read
_TOKEN_DTYPE = np.dtype("<i4")
# Where a prefix hit stopped: the next block's hash-map key (group, parent, tokens) and its hash.
Frontier = tuple[tuple[int, bytes, bytes], bytes]


class RequestStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    temperature: float = 0.0  # 0 = greedy (the tests' equivalence needs greedy)
    stop_token_ids: tuple[int, ...] = ()


class Request:
    def __init__(
        self,
        request_id: str,
        prompt_token_ids,
        params: SamplingParams,
        arrival: float,
        eos_ids: tuple[int, ...] = (EOS_ID,),
    ) -> None:
        self.request_id = request_id
        self.params = params
        self.arrival = arrival
        self.num_prompt_tokens = len(prompt_token_ids)
        ids = np.asarray(prompt_token_ids, dtype=_TOKEN_DTYPE)
        # The prompt stays an array: only the torch runner reads its ids (`token_ids`, listed
        # once when first asked for), and listing 1-100k ids per request is most of a simulated
        # request's cost of admission.
        self._prompt = ids
        self._token_ids: list[int] | None = None
        self.outputs: list[int] = []
        self.token_bytes = bytearray(ids.tobytes())
        self.num_computed_tokens = 0
        self.eos_ids = eos_ids
        # One block table per KV group (config.ModelPreset.kv_groups; group 0 is full attention).
        # Sliding-window groups hold NULL_BLOCK for blocks that fell out of the window.
        self.block_tables: list[list[int]] = [[]]
        self.num_reclaimed_blocks = 0  # leading blocks the sliding groups gave back
        self.snapshot_points: list[int] = []  # block counts whose window state is kept when reached
        # `replay+junction` (vLLM 0.32): the sliding blocks this request hashes, its own windows
        # before its snapshot points (vLLM's reachable_block_mask); its others are never hittable.
        self.window_mask: set[int] = set()
        self.block_hashes: list[bytes] = []  # of the full blocks of token_ids, grown lazily
        self.num_cached_blocks = 0  # leading blocks of block_table already registered by hash
        # Why the scheduler could not admit it last time (see _still_blocked):
        # (the pool's free() count, the hit's frontier, hit tokens, chunk tokens).
        self.blocked: tuple[int, Frontier | None, int, int] | None = None
        self.status = RequestStatus.WAITING
        # Prompt tokens found cached at first admission, by tier (vLLM sets it once); None before.
        self.cached_tiers: dict[str, int] | None = None
        self.first_scheduled_at: float | None = None
        self.num_preemptions = 0
        self.finish_reason: str | None = None
        self.num_emitted = 0  # outputs already handed to the caller

    @property
    def block_table(self) -> list[int]:
        """The first (full-attention) group's block table."""
        return self.block_tables[0]

    @property
    def token_ids(self) -> list[int]:
        """Prompt then outputs: after a recompute preemption the outputs are re-prefilled too."""
        if self._token_ids is None:
            self._token_ids = self._prompt.tolist() + self.outputs
        return self._token_ids

    @property
    def last_token(self) -> int:
        return self.outputs[-1] if self.outputs else int(self._prompt[-1])

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + len(self.outputs)

    @property
    def output_token_ids(self) -> list[int]:
        return list(self.outputs)

    @property
    def num_output_tokens(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    @property
    def cached_tokens(self) -> int:
        return sum(self.cached_tiers.values()) if self.cached_tiers else 0

    def cached_in(self, tier: str) -> int:
        return self.cached_tiers.get(tier, 0) if self.cached_tiers else 0

    @property
    def cached_tokens_device(self) -> int:
        return self.cached_in("device")

    @property
    def cached_tokens_cpu(self) -> int:
        return self.cached_in("cpu")

    @property
    def admitted(self) -> bool:
        return self.cached_tiers is not None

    @property
    def is_prefill(self) -> bool:
        """True while prompt tokens (or re-prefilled outputs) remain to compute."""
        return self.num_computed_tokens < self.num_tokens - 1 or self.num_output_tokens == 0

    @property
    def finished(self) -> bool:
        return self.status is RequestStatus.FINISHED

    def block_tokens(self, i: int, block_size: int) -> bytes:
        width = block_size * TOKEN_BYTES
        return bytes(self.token_bytes[i * width : (i + 1) * width])

    def append_token(self, token: int) -> None:
        self.outputs.append(token)
        if self._token_ids is not None:
            self._token_ids.append(token)
        self.token_bytes += token.to_bytes(TOKEN_BYTES, "little", signed=True)
        p = self.params
        n = self.num_output_tokens
        if n >= p.max_tokens:
            self.finish_reason = "length"
        elif n >= p.min_tokens and (
            token in p.stop_token_ids or (token in self.eos_ids and not p.ignore_eos)
        ):
            self.finish_reason = "stop"
