"""Every shipped profile, every API: the prompts as materialized are as long as the trace says.

Tool-shaped turns put the tool schemas inside the system prompt's trace tokens; where the
schemas outgrew a scaled system prompt, the system text vanished (a Messages body without
`system`) and every prompt grew past the trace. Counted here with a tokenizer (the fixture's:
one token per word or punctuation run), so every text is fitted to its exact length.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.driver.apis.messages.convert import to_messages
from harness.driver.apis.responses.convert import to_input
from harness.trace.chat_tokens import ChatTokenizer
from harness.trace.generate import generate
from harness.trace.profile import load_profile
from harness.trace.requests import RequestSource
from harness.trace.tool_calls import PAYLOAD_ARGUMENT

from .chat_fixtures import tokenizer_dir

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "workloads").glob("*.yaml"))


def _shipped() -> list[tuple[str, Path, dict]]:
    """(name, profile, overrides): each workload file, and each scenario that draws from one."""
    out = [(p.stem, p, {}) for p in PROFILES]
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        w = (yaml.safe_load(path.read_text()) or {}).get("workload") or {}
        if w.get("profile"):
            out.append((f"scenario {path.stem}", ROOT / w["profile"], w.get("overrides") or {}))
    return out


@pytest.fixture(scope="module")
def count(tmp_path_factory):
    return ChatTokenizer.load(tokenizer_dir(tmp_path_factory.mktemp("tok"))).count


def _chat_length(messages: list[dict], tools: list | None, count) -> int:
    """A chat prompt's trace tokens: every message's text, each call's free-text argument
    (the rest of its arguments is scaffolding, like role markers), the tool schemas."""
    n = count(json.dumps(tools, ensure_ascii=False)) if tools else 0
    for m in messages:
        n += count(m.get("content") or "")
        for call in m.get("tool_calls") or ():
            key = PAYLOAD_ARGUMENT.get(call["function"]["name"])
            if key is not None:
                n += count(json.loads(call["function"]["arguments"])[key])
    return n


@pytest.mark.parametrize(("name", "profile", "overrides"), _shipped(), ids=lambda v: str(v))
@pytest.mark.slow
def test_materialized_prompts_are_as_long_as_the_trace(name, profile, overrides, count):
    tr = generate(load_profile(profile, overrides=overrides), seed=1, sessions=2)
    families = [s for s in tr.sessions if s.parent is None] + [
        s for s in tr.sessions if s.parent is not None
    ][:1]
    chat = RequestSource(tr, api="chat", token_counter=count)
    ids = RequestSource(tr, api="completions", prompt_format="tokens", token_counter=count)
    for s in families:
        for k in range(min(3, len(s.turns))):
            want = chat.content.prompt_length(s.id, k)
            p = chat.prompt(s.id, k)
            assert p.n_tokens == want and _chat_length(p.messages, p.tools, count) == want, (
                s.id,
                k,
            )
            assert len(ids.prompt(s.id, k).body) == want
            system, _ = to_messages(p.messages)  # Messages: the system blocks
            instructions, _ = to_input(p.messages)  # Responses: the instructions
            if s.mode != "fork":
                assert system and system[0]["text"] and instructions, (name, s.id)
