"""The reference tokenizer and chat template: exact round trips with the trace content, and the
prefix property that makes prefix caching work for chat."""

from __future__ import annotations

import random

import pytest

from harness.engine.config import EOS_ID, VOCAB_SIZE
from harness.serving.chat_template import ChatTemplateError, apply_chat_template
from harness.serving.tokenizer import (
    ASSISTANT_ID,
    BYTE_HIGH,
    BYTE_LOW,
    END_ID,
    NAMED_SPECIALS,
    USER_ID,
    DecodeStream,
    Tokenizer,
)
from harness.trace.chat_form import ChatForm
from harness.trace.content import Content
from harness.trace.model import Session, Trace, TraceHeader, Turn
from harness.vocab import TOKEN_BASE, WORDS

TOK = Tokenizer()


def agent_trace() -> Trace:
    """A main session with a forked and a spawned subagent that join back, sharing a system prompt.

    Every turn has some new input and some output: `Content.messages` merges adjacent messages of
    one role, so a turn with none would fold two turns into one message (see docs/serving.md)."""
    main = Session(
        "main",
        0.0,
        40,
        "sys-a",
        (
            Turn(30, 12),
            Turn(25, 9, spawns=("fork", "spawn")),
            Turn(20, 7),
            Turn(3, 5),
            Turn(18, 1),
            Turn(11, 4),
        ),
    )
    fork = Session(
        "fork",
        0.0,
        40,
        "sys-a",
        (Turn(15, 6), Turn(10, 8)),
        parent="main",
        fork_turn=1,
        mode="fork",
    )
    spawn = Session(
        "spawn", 0.0, 40, "sys-a", (Turn(22, 5),), parent="main", fork_turn=1, mode="spawn"
    )
    return Trace(TraceHeader(seed=7), (main, fork, spawn))


def all_turns(trace: Trace):
    return [(s.id, k) for s in trace.sessions for k in range(len(s.turns))]


@pytest.mark.parametrize("salt", [None, "run-1"])
def test_content_text_encodes_to_content_token_ids_and_back(salt):
    content = Content(agent_trace(), salt=salt)
    for sid, turn in all_turns(content.trace):
        text, ids = content.prompt_text(sid, turn), content.prompt_token_ids(sid, turn)
        assert TOK.encode(text) == ids
        assert TOK.decode(ids) == text
        assert (
            TOK.encode(content.output_text(sid, turn))
            == content.segment_token_ids(content.output_segment(sid, turn)).tolist()
        )


def test_every_word_is_its_content_id():
    assert TOK.encode(" ".join(WORDS)) == list(range(TOKEN_BASE, TOKEN_BASE + len(WORDS)))


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "the",
        " the ",
        "the  of",
        "the\nof\tand",
        "Hello, World!",
        "thethe",
        "the,of",
        "naïve café — 日本語 🙂",
        "<",
        "<|",
        "<|user|>",
        "<|nope|>",
        "<|tok_0|>",
        "<|tok_20000|>",
        "<|tok_020000|>",
        "<|tok_1000|>",
        "a<|eos|>b",
        "x" * 300,
        "line\r\nbreak",
    ],
)
def test_any_text_round_trips(text):
    ids = TOK.encode(text)
    assert all(0 <= i < VOCAB_SIZE for i in ids)
    assert TOK.decode(ids) == text


def test_special_forms_parse_back_to_their_ids():
    assert TOK.encode("<|eos|>") == [EOS_ID]
    assert TOK.encode("<|user|>") == [USER_ID]
    assert all(TOK.encode(text) == [i] for i, text in NAMED_SPECIALS.items())
    assert TOK.encode("<|tok_20000|>") == [20000]
    # an id with its own meaning (a word, a byte) is never spelled as <|tok_N|>: that stays text
    assert len(TOK.encode("<|tok_1000|>")) > 1
    assert len(TOK.encode(f"<|tok_{BYTE_LOW}|>")) > 1


def test_every_id_decodes_and_generated_ids_mostly_re_encode():
    assert all(TOK.decode([i]) for i in range(VOCAB_SIZE))
    rng = random.Random(0)
    ids = [rng.randrange(VOCAB_SIZE) for _ in range(20_000)]
    ids = [i for i in ids if not BYTE_LOW <= i < BYTE_HIGH]  # bytes may legitimately re-split
    assert TOK.encode(TOK.decode(ids)) == ids


def test_decode_of_ids_outside_the_vocabulary_is_an_error():
    with pytest.raises(ValueError, match="32000"):
        TOK.decode([VOCAB_SIZE])


def test_streaming_decode_equals_whole_decode_and_joins_split_characters():
    text = "the of 日本 and 🙂 <|eos|> error value"
    ids = TOK.encode(text)
    stream = DecodeStream()
    deltas = [stream.push(i) for i in ids]
    assert "".join(deltas) + stream.flush() == text
    assert "本" in deltas  # the character's last byte releases it whole, never half a character


def test_invalid_utf8_bytes_decode_to_replacement_characters():
    assert TOK.decode([BYTE_LOW + 0xFF, TOKEN_BASE]) == "\ufffdthe"


# ---- chat template ---------------------------------------------------------------------------


def test_chat_template_layout():
    ids = apply_chat_template(
        [{"role": "system", "content": "the"}, {"role": "user", "content": "of and"}], TOK
    )
    assert ids == [
        3,
        TOKEN_BASE,
        END_ID,
        USER_ID,
        TOKEN_BASE + 1,
        TOKEN_BASE + 2,
        END_ID,
        ASSISTANT_ID,
    ]


@pytest.mark.parametrize("salt", [None, "s"])
def test_chat_prompt_of_a_turn_is_a_prefix_of_the_next_turns(salt):
    content = Content(agent_trace(), salt=salt)
    for s in content.trace.sessions:
        for turn in range(len(s.turns) - 1):
            now = apply_chat_template(ChatForm(content).messages(s.id, turn), TOK)
            nxt = apply_chat_template(ChatForm(content).messages(s.id, turn + 1), TOK)
            assert nxt[: len(now)] == now, (s.id, turn)
            # and the continuation is exactly the recorded reply, closed, then the new input
            reply = content.output_text(s.id, turn)
            if reply:
                assert nxt[len(now) : len(now) + len(TOK.encode(reply)) + 1] == TOK.encode(
                    reply
                ) + [END_ID]


def test_chat_prompt_of_a_fork_extends_its_parents_context():
    content = Content(agent_trace())
    parent = apply_chat_template(ChatForm(content).messages("main", 1), TOK)
    fork = apply_chat_template(ChatForm(content).messages("fork", 0), TOK)
    assert fork[: len(parent)] == parent


def test_chat_content_parts_and_null_assistant_content():
    parts = [{"type": "text", "text": "the"}, {"type": "text", "text": "of"}]
    ids = apply_chat_template(
        [{"role": "user", "content": parts}, {"role": "assistant", "content": None}],
        TOK,
        add_generation_prompt=False,
    )
    assert TOK.decode(ids[1:-3]) == "the\nof"


@pytest.mark.parametrize(
    "messages, param",
    [
        ([], "messages"),
        ("hi", "messages"),
        ([{"role": "wizard", "content": "x"}], "messages[0].role"),
        ([{"content": "x"}], "messages[0].role"),
        (["x"], "messages[0]"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user"}], "messages[0].content"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
            "messages[0].content[0]",
        ),
    ],
)
def test_chat_template_rejects_bad_messages_naming_the_field(messages, param):
    with pytest.raises(ChatTemplateError) as info:
        apply_chat_template(messages, TOK)
    assert info.value.param == param


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "read the file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def test_tools_open_the_prompt_and_tool_calls_follow_the_text_keeping_the_prefix_property():
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
    }
    turn1 = [
        {"role": "system", "content": "the system"},
        {"role": "user", "content": "read the file"},
    ]
    turn2 = turn1 + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "the code"},
    ]
    first = apply_chat_template(turn1, TOK, tools=TOOLS)
    second = apply_chat_template(turn2, TOK, tools=TOOLS)
    assert second[: len(first)] == first
    assert first[0] == TOK.encode("<|tools|>")[0] and TOK.decode(first).count("read_file") == 1
    assert '"name":"read_file"' in TOK.decode(second[len(first) :])
    assert TOK.encode("<|tool_call|>")[0] in second[len(first) :]
    assert apply_chat_template(turn1, TOK, tools=[]) == apply_chat_template(turn1, TOK)


@pytest.mark.parametrize(
    "kwargs, param",
    [
        ({"tools": "read"}, "tools"),
        ({"tools": ["read"]}, "tools"),
        (
            {"messages": [{"role": "user", "content": "x", "tool_calls": []}]},
            "messages[0].tool_calls",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x", "tool_calls": "f"}]},
            "messages[0].tool_calls",
        ),
    ],
)
def test_bad_tools_and_tool_calls_name_the_field(kwargs, param):
    messages = kwargs.pop("messages", [{"role": "user", "content": "x"}])
    with pytest.raises(ChatTemplateError) as info:
        apply_chat_template(messages, TOK, **kwargs)
    assert info.value.param == param
