"""Shared for the recording tests: a simulated `harness serve`, and one recording of the scripted
agents (tests/record/agents.py) made through `harness record` in front of it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.engine.config import EngineConfig
from harness.serving.server import BackgroundServer

API_KEY = "sk-test-KEY-never-written-4242"


@pytest.fixture(scope="session")
def sim_server():
    config = EngineConfig(
        runner="simulated",
        num_gpu_blocks=2048,
        device="cpu",
        max_model_len=16384,
        sim_time_scale=0.0,
    )
    with BackgroundServer(config) as server:
        yield server


def recording(upstream: str, folder: Path, salt: Path, **flags):
    """The recording `harness record` makes of these flags (its own flag parsing)."""
    from harness.app.commands.record import recording_of

    args = argparse.Namespace(
        upstream=upstream,
        output=folder,
        host="127.0.0.1",
        port=0,
        keep_content=flags.get("keep_content", False),
        tokenizer=flags.get("tokenizer", "reference"),
        block_tokens=flags.get("block_tokens", 16),
        salt_file=salt,
        spawn_window=None,
        write_every=flags.get("write_every", 30.0),
        rebuild=None,
    )
    return recording_of(args)


@dataclass
class Recorded:
    folder: Path
    sent: list  # what each task sent, in order: [(task, [Sent, ...]), ...]


def record_tasks(server_url: str, folder: Path, salt: Path, tasks, **flags) -> Recorded:
    import anthropic
    import openai

    from harness.record.recorder import BackgroundRecorder

    sent = []
    with BackgroundRecorder(recording(server_url, folder, salt, **flags)) as url:
        oa = openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0)
        an = anthropic.Anthropic(base_url=url, api_key=API_KEY, max_retries=0)
        with oa, an:
            for task in tasks:
                client = an if task.__name__.startswith("anthropic") else oa
                sent.append((task.__name__, task(client)))
    return Recorded(folder, sent)


@pytest.fixture(scope="session")
def recorded(sim_server, tmp_path_factory) -> Recorded:
    from tests.record.agents import anthropic_task, openai_task, responses_task

    base = tmp_path_factory.mktemp("recorded")
    return record_tasks(
        sim_server.url, base / "rec", base / "salt", [openai_task, anthropic_task, responses_task]
    )
