"""One configuration model: `harness replay` flags are overrides onto a scenario, with the
scenario's defaults (the table in docs/driver.md), and every replay setting is reachable from YAML.
The scenario's `load:` and `target.timeouts` are the driver's own models: one declaration each.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from harness.app.build import block_size, http_target_config, replay_config
from harness.app.cli import build_parser
from harness.app.commands.run import replay_scenario
from harness.app.flags import BY_FIELD
from harness.app.scenario import Scenario, default_text, validate
from harness.driver.config import Load, ReplayConfig, Sending
from harness.driver.http import HTTPSettings, HTTPTargetConfig
from harness.driver.target import Timeouts
from harness.trace.native import write_trace
from tests.driver.helpers import sess, trace

ROOT = Path(__file__).resolve().parents[1]
URL = "http://127.0.0.1:9/v1"
# HTTPTargetConfig fields a run sets from elsewhere (not replay settings): the 8 MiB SSE event cap
NOT_REPLAY_SETTINGS = {"max_event_bytes"}


@pytest.fixture
def trace_file(tmp_path) -> Path:
    path = tmp_path / "trace.jsonl"
    write_trace(trace(sess("a", [(8, 2, 0.0), (8, 2, 0.5)]), sess("b", [(8, 2, 0.0)])), path)
    return path


def _replay_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["replay", *argv])


def _built(scenario, tr=None) -> tuple[ReplayConfig, HTTPTargetConfig]:
    config = replay_config(scenario, "run")
    tr = tr or trace(sess("a", [(8, 2, 0.0)]))
    return config, http_target_config(scenario, [URL], scenario.target.model, tr, config)


def _fields(obj) -> dict:
    if isinstance(obj, BaseModel):
        return dict(obj)
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _leaves(model: type[BaseModel], prefix: str) -> set[str]:
    """The dotted file keys of a model's settings, nested models' fields included."""
    out = set()
    for name, info in model.model_fields.items():
        key = f"{prefix}.{info.alias or name}"
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out |= _leaves(sub, key)
        else:
            out.add(key)
    return out


def test_replay_and_scenario_defaults_agree(trace_file):
    args = _replay_args(str(trace_file), "-o", "out", "--endpoint", URL, "--model", "m")
    given = set(vars(args)) & set(BY_FIELD)
    assert given == {"target.model"}  # no flag that was not given carries a default of its own
    from_flags = _built(replay_scenario(args))
    from_yaml = _built(
        validate(
            {
                "name": "yaml",
                "workload": {"trace": str(trace_file)},
                "target": {"kind": "endpoints", "endpoints": [{"url": URL}], "model": "m"},
            }
        )
    )
    assert _fields(from_flags[0]) == _fields(from_yaml[0])
    assert _fields(from_flags[1]) == _fields(from_yaml[1])
    # the defaults, enumerated: agentic replay
    config, target = from_yaml
    assert (config.load, config.concurrency, config.api, config.prompt_format, config.routing) == (
        "closed",
        4,
        "completions",
        "tokens",
        "session_sticky",
    )
    assert (
        config.history,
        config.drain_s,
        config.follow_parent,
        config.block_size,
        config.seed,
    ) == ("recorded", 60.0, True, 16, 1)
    assert target.timeouts == Timeouts(connect=30, ttft=600, idle=120, total=600)
    assert (target.send_min_tokens, target.send_ignore_eos, target.continuous_usage) == (
        True,
        True,
        "auto",  # resolved when the target starts: on where /v1/models says vLLM
    )
    assert (target.api, target.preflight) == ("completions", True)
    assert target.sampled() == {"temperature": 0.0}  # greedy unless asked
    # the driver's own defaults are the same ones (library use, tests, benchmarks)
    library = _fields(ReplayConfig())
    assert {k: v for k, v in library.items() if k != "run_id"} == {
        k: v for k, v in _fields(config).items() if k != "run_id"
    }
    direct = HTTPTargetConfig(endpoints=(URL,), model="m", max_connections=target.max_connections)
    assert _fields(direct) == _fields(target)
    assert Timeouts() == target.timeouts


def test_the_docs_table_is_the_scenario_defaults():
    text = (ROOT / "docs" / "driver.md").read_text()
    section = text.split("## Defaults", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| ([^|]+) \| ([^|]+) \|", section, flags=re.M)
    documented = {field: shown.strip() for field, _, shown in rows}
    assert documented, "no Defaults table in docs/driver.md"
    for field, shown in documented.items():
        assert default_text(field) == shown, field
    assert set(BY_FIELD) <= set(documented)  # every flag
    load = _leaves(Load, "load") | _leaves(Timeouts, "target.timeouts")
    sending = {f"target.{name}" for name in Sending.model_fields}
    http = _leaves(HTTPSettings, "target")
    wanted = load | sending | http
    assert wanted <= set(documented), wanted - set(documented)  # every driver setting


def test_the_scenario_load_is_the_driver_model():
    # not a copy: the same class, so a setting is declared once
    assert Scenario.model_fields["load"].annotation is Load
    target = Scenario.model_fields["target"].annotation
    assert target.model_fields["timeouts"].annotation is Timeouts
    assert issubclass(ReplayConfig, Load) and issubclass(ReplayConfig, Sending)
    # the HTTP target's settings: the driver's model, composed into the scenario's target
    assert issubclass(target, HTTPSettings) and issubclass(HTTPTargetConfig, HTTPSettings)
    assert not set(HTTPSettings.model_fields) & set(vars(target).get("__annotations__", {}))


def test_every_replay_setting_is_settable_from_yaml(tmp_path, trace_file):
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    doc = {
        "name": "everything",
        "run_id": "custom-id",
        "workload": {"trace": str(trace_file), "seed": 9, "salt": "s", "tokenizer": str(tokenizer)},
        "target": {
            "kind": "endpoints",
            "endpoints": [{"url": URL}],
            "model": "m",
            "api": "messages",
            "cache_control": True,
            "anthropic_version": "2023-01-01",
            "cache_rules": {"kind": "anthropic", "ttl": "1h"},
            "prices": {"input": 3.0},
            "session_headers": ["dynamo", "smg"],
            "prompt_format": "text",
            "routing": "least_outstanding",
            "follow_parent": False,
            "send_min_tokens": False,
            "send_ignore_eos": False,
            "continuous_usage": True,
            "sampling": {"temperature": 0.5, "seed": 2},
            "cache_details": True,
            "tool_choice": "required",
            "session_id_field": "sid",
            "max_connections": 7,
            "preflight": False,
            "block_size": 32,
            "headers": {"X-Team": "bench"},
            "api_key_file": str(tokenizer.with_name("key")),
            "timeouts": {"connect_s": 1, "ttft_s": 2, "idle_s": 3, "total_s": 4},
            "network": {"proxy": "none", "max_redirects": 2, "keepalive_s": 1.5},
        },
        "load": {
            "mode": "open",
            "concurrency": 3,
            "session_rate": 2.5,
            "arrival": "constant",
            "time_scale": 0.5,
            "max_sessions": 5,
            "max_requests": 6,
            "max_duration_s": 70,
            "drain_s": 8,
            "warmup_s": 1,
            "warmup_requests": 2,
            "cooldown_s": 3,
            "history": "live",
            "cycle_trace": False,
            "mid_trajectory": True,
            "window": "steady",
            "retry": {"attempts": 3},
            "think_cap_s": 30,
        },
    }
    tokenizer.with_name("key").write_text("sk-test\n")
    default = _built(
        validate(
            {
                "name": "d",
                "workload": {"trace": str(trace_file)},
                "target": {"kind": "endpoints", "endpoints": [{"url": URL}], "model": "m"},
            }
        )
    )
    changed = _built(validate(doc))
    for built, base in zip(changed, default, strict=True):
        same = {k for k, v in _fields(built).items() if v == _fields(base)[k]}
        # previous_response_id is an option of api responses, not of this doc's messages
        assert same <= NOT_REPLAY_SETTINGS | {"endpoints", "model", "previous_response_id"}, same
    doc["target"] |= {"api": "responses", "cache_control": False, "previous_response_id": True}
    doc["target"]["cache_rules"] = "none"
    assert all(_fields(built)["previous_response_id"] for built in _built(validate(doc)))


def test_block_size_follows_the_engine_unless_set():
    engine = {
        "name": "e",
        "workload": {"profile": "workloads/agentx-cpu.yaml"},
        "target": {"engine": {"options": {"block_size": 32}}},
    }
    assert block_size(validate(engine)) == 32
    engine["target"]["block_size"] = 64
    assert block_size(validate(engine)) == 64


def test_a_bad_flag_value_names_the_flag_and_the_field(trace_file):
    from harness.errors import InputError

    args = _replay_args(
        str(trace_file), "-o", "o", "--endpoint", URL, "--model", "m", "--concurrency", "0"
    )
    with pytest.raises(InputError, match=r"field '--concurrency \(load.concurrency\)'"):
        replay_scenario(args)


def test_set_reaches_fields_without_a_flag(trace_file):
    args = _replay_args(
        str(trace_file),
        "-o",
        "o",
        "--endpoint",
        URL,
        "--model",
        "m",
        "--set",
        "gpus=8",
        "--set",
        "target.headers={X-A: b}",
    )
    scenario = replay_scenario(args)
    assert scenario.gpus == 8 and scenario.target.headers == {"X-A": "b"}


def test_both_verbs_replay_on_uvloop_when_installed():
    import asyncio

    from harness.driver.replay_into import run_blocking

    uvloop = pytest.importorskip("uvloop")

    async def running_loop():
        return asyncio.get_running_loop()

    # `harness run` and `harness replay` both replay through runner.replay_point -> run_blocking
    assert isinstance(run_blocking(running_loop()), uvloop.Loop)
