"""Small hand-built traces and files for the trace tests."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.trace.generate import generate
from harness.trace.model import Session, Trace, TraceHeader, Turn
from harness.trace.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
CPU_PROFILE = ROOT / "workloads" / "agentx-cpu.yaml"


def turn(new_input: int, output: int, think: float = 0.0, spawns: tuple[str, ...] = ()) -> Turn:
    return Turn(new_input, output, think, tuple(spawns))


def make_trace(*sessions: Session, seed: int = 7, block_size: int = 16) -> Trace:
    return Trace(TraceHeader(seed=seed, profile="tiny", block_size=block_size), tuple(sessions))


# The shipped profiles send Python source in tool-shaped turns; tests of the mechanics (replay
# order, caches, lengths) use word lists in plain turns unless they ask otherwise: cheaper to
# materialize, and one token per word for any tokenizer.
WORDS_FORM = {"content": "words", "turn_form": "plain"}


def small_generated(sessions: int = 12, seed: int = 3, **sets) -> Trace:
    """A CPU-scaled AgentX trace: real shapes (forks, joins), small token counts; word lists in
    plain turns unless `content` / `turn_form` are given."""
    overrides = {"subagents.probability": 0.8, **WORDS_FORM, **sets}
    profile = load_profile(CPU_PROFILE, overrides=overrides)
    return generate(profile, seed=seed, sessions=sessions)


def no_think(trace: Trace) -> Trace:
    """The same trace without think time, so a replay of it runs in seconds."""
    sessions = tuple(
        dataclasses.replace(s, turns=tuple(dataclasses.replace(t, think_s=0.0) for t in s.turns))
        for s in trace.sessions
    )
    return Trace(trace.header, sessions)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# A hand-written Mooncake file: requests 0, 2 and 3 form one prefix chain.
MOONCAKE = "\n".join(
    json.dumps(r)
    for r in [
        {"timestamp": 0, "input_length": 1200, "output_length": 10, "hash_ids": [0, 1, 2]},
        {"timestamp": 500, "input_length": 700, "output_length": 5, "hash_ids": [3, 4]},
        {"timestamp": 1000, "input_length": 1300, "output_length": 7, "hash_ids": [0, 1, 5]},
        {"timestamp": 2500, "input_length": 1700, "output_length": 9, "hash_ids": [0, 1, 6, 7]},
    ]
)
