"""Recorded prompts in the trace (harness/trace/recorded.py): the native file's deltas, errors
naming their field, the chat messages and tools a replay sends, and the segments the ideal
cache walks."""

from __future__ import annotations

import json

import pytest

from harness.errors import TraceFormatError
from harness.serving.tokenizer import Tokenizer
from harness.trace.content import Content
from harness.trace.model import Session, Trace, TraceHeader, Turn
from harness.trace.native import read_trace, write_trace
from harness.trace.recorded import Call, Message, RecordedPrompt, Shaped, Text
from harness.trace.requests import RequestSource
from harness.trace.stats import compute_stats

TOOL = Shaped(
    "k-tool",
    12,
    {
        "type": "function",
        "function": {
            "name": "Read",
            "description": Text((("k-desc", 5),)),
            "parameters": {"type": "object"},
        },
    },
)
SYSTEM = Message("system", (Text((("k-s1", 16), ("k-s2", 4))),))
USER = Message("user", (Text((("k-u1", 7),)),))
CALL = Call("call_1", "Read", Shaped("k-args", 6, {"path": Text((("k-path", 3),))}, compact=True))
ASSISTANT = Message("assistant", (Text((("k-a1", 3),)),), (CALL,))
RESULT = Message("tool", (Text((("k-r1", 16), ("k-r2", 9))),), call_id="call_1")


def _prompts() -> list[RecordedPrompt]:
    first = RecordedPrompt((TOOL,), (SYSTEM, USER))
    return [first, RecordedPrompt((TOOL,), first.messages + (ASSISTANT, RESULT))]


def _trace() -> Trace:
    p = _prompts()
    turns = (Turn(7, 4, 0.0, prompt=p[0]), Turn(25, 5, 1.5, prompt=p[1]))
    return Trace(
        TraceHeader(seed=3, profile="recording"), (Session("r1", 0.0, 32, "sys-x", turns),)
    )


def test_the_native_file_round_trips_as_deltas(tmp_path):
    write_trace(_trace(), tmp_path / "t.jsonl")
    assert read_trace(tmp_path / "t.jsonl") == _trace()
    line = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[1])
    second = line["turns"]["prompts"]["1"]
    assert second["keep"] == 2 and len(second["messages"]) == 2 and "tools" not in second


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda p: p["1"].update(keep=5), "turns.prompts.1.keep"),
        (lambda p: p["0"]["messages"][0].update(role="robot"), "turns.prompts.0.messages[0].role"),
        (
            lambda p: p["0"]["messages"][1]["parts"][0].append(["k", -1]),
            "turns.prompts.0.messages[1].parts[0][1]",
        ),
        (lambda p: p["0"]["messages"][0].update(colour=1), "turns.prompts.0.messages[0].colour"),
        (lambda p: p.update({"9": {}}), "turns.prompts.9"),
    ],
)
def test_a_bad_recorded_prompt_names_its_field(tmp_path, edit, field):
    write_trace(_trace(), tmp_path / "t.jsonl")
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    session = json.loads(lines[1])
    edit(session["turns"]["prompts"])
    (tmp_path / "t.jsonl").write_text(lines[0] + "\n" + json.dumps(session) + "\n")
    with pytest.raises(TraceFormatError) as err:
        read_trace(tmp_path / "t.jsonl")
    assert f":2: field '{field}'" in str(err.value)


def test_a_replay_sends_the_recorded_messages_with_their_lengths():
    """Stand-in words, each one token of `harness serve`'s tokenizer: every text keeps its
    count, every role, call and tool schema is there."""
    source = RequestSource(_trace(), api="chat")
    prompt = source.prompt("r1", 1)
    roles = [m["role"] for m in prompt.messages]
    assert roles == ["system", "user", "assistant", "tool"]
    count = Tokenizer().encode
    assert len(count(prompt.messages[0]["content"])) == 20
    assert len(count(prompt.messages[3]["content"])) == 25
    call = prompt.messages[2]["tool_calls"][0]
    assert call["id"] == "call_1" and call["function"]["name"] == "Read"
    assert len(count(json.loads(call["function"]["arguments"])["path"])) == 3
    assert prompt.messages[3]["tool_call_id"] == "call_1"
    assert prompt.tools[0]["function"]["name"] == "Read"
    assert prompt.n_tokens == 12 + 20 + 7 + 3 + 6 + 25


def test_kept_text_is_sent_as_it_was():
    text = Text((("k1", 2, "Hello, "), ("k2", 1, "world")))
    prompt = RecordedPrompt((), (Message("user", (text,)),))
    trace = Trace(TraceHeader(seed=1), (Session("r1", 0.0, 0, "s", (Turn(3, 1, prompt=prompt),)),))
    assert RequestSource(trace, api="chat").prompt("r1", 0).messages[0]["content"] == "Hello, world"
    assert RequestSource(trace, api="completions", prompt_format="text").prompt("r1", 0).body == (
        "Hello,  world"  # text prompts join segments with a space
    )


def test_a_salt_opens_the_system_message():
    source = RequestSource(_trace(), api="chat", salt="run7")
    first = source.prompt("r1", 0).messages[0]
    assert first["role"] == "system" and first["content"].startswith("run7 ")


def test_segments_and_the_ideal_follow_the_chunks():
    content = Content(_trace())
    kinds = [k for k, _ in content.labelled("r1", 1)]
    assert kinds == [
        "system",
        "system",
        "system",
        "history",
        "previous_output",
        "previous_output",
        "tool_result",
        "tool_result",
    ]
    stats = compute_stats(_trace(), block_size=1)
    # turn 1 shares turn 0's whole prompt (39 tokens) of its 73; turn 0 shares nothing
    assert stats["ideal_cache_hit"] == pytest.approx(39 / (39 + 73))
