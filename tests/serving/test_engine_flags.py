"""`engine_flags` is the inverse of `engine_config_from_args`: a scenario's engine options reach a
served replica unchanged."""

import argparse

import pytest

from harness.app.commands.serve import add_engine_arguments, engine_config_from_args, engine_flags
from harness.engine.config import EngineConfig
from harness.errors import EngineError

OPTIONS = {
    "block_size": 8,
    "num_gpu_blocks": 512,
    "max_num_batched_tokens": 1024,
    "max_num_seqs": 7,
    "enable_prefix_caching": False,
    "long_prefill_token_threshold": 512,
    "prefill_schedule_interval": 2,
    "cpu_offload_blocks": 64,
    "runner": "simulated",
    "preset": "tiny",
    "seed": 3,
    "sim_time_scale": 0.5,
    "step_time_scale": 1.3,
    "served_model_name": "m",
    "debug_checks": True,
}


def test_flags_round_trip_to_the_same_config():
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    args = parser.parse_args(engine_flags(OPTIONS))
    assert engine_config_from_args(args) == EngineConfig.from_dict(OPTIONS)


def test_an_option_without_a_flag_is_an_error():
    with pytest.raises(EngineError, match="bogus"):
        engine_flags({"bogus": 1})
