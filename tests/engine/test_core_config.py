"""EngineConfig validation: every bad value is a one-line EngineError naming the field."""

from __future__ import annotations

import pytest

from harness.engine.config import PRESETS, EngineConfig
from harness.errors import EngineError


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("block_size", 0, "must be positive"),
        ("block_size", 16.0, "expected int"),
        ("num_gpu_blocks", -3, "must be positive"),
        ("num_gpu_blocks", 1, "need >= 2"),
        ("kv_cache_memory_gb", 0.0, "positive number"),
        ("kv_cache_memory_gb", float("nan"), "positive number"),
        ("max_num_batched_tokens", 0, "must be positive"),
        ("max_num_seqs", True, "expected int"),
        ("max_model_len", 40_000, "exceeds preset 'tiny' limit 32768"),
        ("enable_prefix_caching", "yes", "expected bool"),
        ("long_prefill_token_threshold", -1, ">= 0"),
        ("prefill_schedule_interval", 0, "must be positive"),
        ("cpu_offload_blocks", -1, ">= 0"),
        ("runner", "vllm", "not one of torch, simulated"),
        ("preset", "huge", "not one of"),
        ("device", "tpu", "not one of"),
        ("dtype", "int8", "not one of"),
        ("sim_time_scale", -1.0, ">= 0"),
        ("step_time_scale", 0.9, ">= 1"),
        ("step_time_scale", float("nan"), ">= 1"),
        ("cost_model", 3, "expected str or null"),
    ],
)
def test_bad_values_name_the_field(field, value, match):
    with pytest.raises(EngineError, match=match) as info:
        EngineConfig(**{field: value})
    assert str(info.value).startswith(f"field '{field}'")


def test_from_dict_rejects_unknown_keys():
    with pytest.raises(EngineError, match="unknown engine option.*gpu_memory_utilization"):
        EngineConfig.from_dict({"block_size": 16, "gpu_memory_utilization": 0.9})
    assert EngineConfig.from_dict({"max_num_seqs": 8}).max_num_seqs == 8


def test_defaults_follow_the_preset():
    cfg = EngineConfig()
    assert cfg.model_len == PRESETS["tiny"].max_model_len
    per_block = PRESETS["tiny"].kv_bytes_per_token("float32") * 16
    assert cfg.total_blocks == 2**30 // per_block  # ~1 GiB of KV on CPU by default
    assert EngineConfig(kv_cache_memory_gb=0.5).total_blocks == cfg.total_blocks // 2
    assert EngineConfig(num_gpu_blocks=100, kv_cache_memory_gb=9.0).total_blocks == 100
    # The simulated runner may model contexts longer than the preset trained for.
    assert EngineConfig(runner="simulated", max_model_len=200_000).model_len == 200_000


@pytest.mark.slow
def test_cuda_device_without_cuda_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is present on this machine")
    from harness.engine.runners.torch_runner import TorchRunner

    with pytest.raises(EngineError, match="CUDA is not available"):
        TorchRunner(EngineConfig(device="cuda", num_gpu_blocks=4))
