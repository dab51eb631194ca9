"""Each API's request body as one chat-form conversation, and each response (stream or JSON)
as its output, usage and cache fields (harness/record/conversation.py, replies.py)."""

from __future__ import annotations

import json

from harness.record.conversation import api_of, parse
from harness.record.replies import ReplyReader


def test_paths_name_their_api():
    assert api_of("/v1/chat/completions") == "chat" and api_of("/openai/v1/completions/") == (
        "completions"
    )
    assert api_of("/v1/messages") == "messages" and api_of("/v1/responses") == "responses"
    assert api_of("/v1/models") is None


def test_messages_blocks_become_chat_messages():
    body = {
        "system": [{"type": "text", "text": "S"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "max_tokens": 9,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
                    {"type": "image", "source": {}},
                    {"type": "text", "text": "ok"},
                ],
            },
        ],
    }
    conv = parse("messages", body)
    assert [m["role"] for m in conv.messages] == ["system", "user", "assistant", "tool", "user"]
    assert conv.messages[2]["tool_calls"][0] == {
        "id": "t1",
        "name": "Bash",
        "arguments": '{"command": "ls"}',
    }
    assert conv.messages[2]["content"] == ["hmm"] and conv.messages[3]["tool_call_id"] == "t1"
    assert conv.tools[0]["function"]["name"] == "Bash" and conv.max_tokens == 9
    assert conv.dropped == {"image": 1}


def test_responses_items_and_completions_prompts():
    conv = parse(
        "responses",
        {
            "instructions": "I",
            "previous_response_id": "r1",
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "q"}],
                },
                {"type": "function_call", "call_id": "f1", "name": "Read", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "f1", "output": "x"},
            ],
        },
    )
    assert [m["role"] for m in conv.messages] == ["system", "user", "assistant", "tool"]
    assert conv.previous_response_id == "r1"
    assert parse("completions", {"prompt": [[1, 2, 3]]}).token_ids == [1, 2, 3]
    assert parse("completions", {"prompt": "hi"}).messages[0]["content"] == ["hi"]


def _sse(events) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    )


def test_a_responses_stream_gives_its_output_and_usage():
    final = {
        "id": "resp_1",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi"}],
            },
            {"type": "function_call", "call_id": "f2", "name": "Bash", "arguments": "{}"},
        ],
        "usage": {
            "input_tokens": 30,
            "output_tokens": 4,
            "input_tokens_details": {"cached_tokens": 16},
        },
    }
    reader = ReplyReader("responses", stream=True)
    data = _sse(
        [
            {"type": "response.created", "response": {"id": "resp_1"}},
            {"type": "response.completed", "response": final},
        ]
    )
    for i in range(0, len(data), 7):  # any split of the bytes
        reader.feed(data[i : i + 7])
    reply = reader.finish()
    assert (reply.text, reply.response_id, len(reply.calls)) == ("hi", "resp_1", 1)
    assert reply.normalized() == {
        "prompt_tokens": 30,
        "output_tokens": 4,
        "cached_tokens": 16,
        "cache_creation_tokens": None,
    }


def test_json_bodies_and_errors():
    reader = ReplyReader("chat", stream=False)
    reader.feed(
        json.dumps(
            {
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "content": "a",
                            "tool_calls": [
                                {"id": "c", "function": {"name": "R", "arguments": "{}"}}
                            ],
                        },
                    }
                ]
            }
        ).encode()
    )
    reply = reader.finish()
    assert reply.text == "a" and reply.calls == [{"id": "c", "name": "R", "arguments": "{}"}]
    assert reply.message()["tool_calls"] == reply.calls
    failed = ReplyReader("messages", stream=True)
    failed.feed(b'event: error\ndata: {"type": "error", "error": {"message": "overloaded"}}\n\n')
    assert failed.finish().error == "overloaded"
