"""Chat messages and tools in Anthropic Messages and OpenAI Responses form (hand-made tool turns)."""

import orjson

from harness.driver.apis.messages.convert import to_messages
from harness.driver.apis.messages.convert import to_tools as anthropic_tools
from harness.driver.apis.messages.request import MessagesRequest
from harness.driver.apis.responses.convert import to_input
from harness.driver.apis.responses.convert import to_tools as responses_tools
from harness.driver.http.config import HTTPTargetConfig
from harness.driver.target import RequestSpec

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "ls", "parameters": {"properties": {}}}},
]

CHAT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the bug in a.py"},
    {
        "role": "assistant",
        "content": "Reading both files.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"a.py"}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "def f():\n    return 1"},
    {"role": "tool", "tool_call_id": "c2", "content": "a.py b.py"},
    {"role": "user", "content": "Also check b.py"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c3",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "b.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "import a"}]},
]


def test_chat_becomes_messages_with_system_blocks_tool_use_and_merged_tool_results():
    system, turns = to_messages(CHAT)
    assert system == [{"type": "text", "text": "You are a coding agent."}]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "text", "text": "Reading both files."},
        {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "c2", "name": "ls", "input": {}},
    ]
    # both results and the user's text after them: one user turn, results first
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "def f():\n    return 1"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "a.py b.py"},
        {"type": "text", "text": "Also check b.py"},
    ]
    assert turns[3]["content"] == [
        {"type": "tool_use", "id": "c3", "name": "read_file", "input": {"path": "b.py"}}
    ]
    assert turns[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "c3", "content": "import a"}
    ]


def test_tools_become_anthropic_and_responses_tools_without_touching_the_originals():
    before = orjson.dumps(TOOLS)
    assert anthropic_tools(TOOLS) == [
        {
            "name": "read_file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "description": "Read a file",
        },
        {"name": "ls", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert responses_tools(TOOLS)[0] == {
        "type": "function",
        "name": "read_file",
        "description": "Read a file",
        "parameters": TOOLS[0]["function"]["parameters"],
    }
    assert orjson.dumps(TOOLS) == before
    assert anthropic_tools(None) is None and responses_tools([]) is None


def test_chat_becomes_responses_items_with_function_calls_after_their_text():
    instructions, items = to_input(CHAT)
    assert instructions == "You are a coding agent."
    assert [i.get("role", i["type"]) for i in items] == [
        "user",
        "assistant",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user",
        "function_call",
        "function_call_output",
    ]
    assert items[2] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "read_file",
        "arguments": '{"path":"a.py"}',  # the JSON text as the chat message had it
    }
    assert items[-1] == {"type": "function_call_output", "call_id": "c3", "output": "import a"}


def _messages_body(**kw) -> dict:
    form = MessagesRequest(
        HTTPTargetConfig(endpoints=("http://h",), model="m", api="messages", **kw)
    )
    spec = RequestSpec(
        request_id="r",
        session_id="s",
        sticky_key="s",
        endpoint=0,
        max_tokens=8,
        prompt_tokens=100,
        messages=CHAT,
        tools=TOOLS,
    )
    return orjson.loads(form.encode(spec)[0])


def test_cache_control_marks_the_system_prompt_and_the_last_two_turns():
    body = _messages_body(cache_control=True)
    marked = [
        (where, i)
        for where, blocks in [("system", body["system"])]
        + [(str(k), t["content"]) for k, t in enumerate(body["messages"])]
        for i, block in enumerate(blocks)
        if "cache_control" in block
    ]
    last = len(body["messages"]) - 1
    assert marked == [("system", 0), (str(last - 1), 0), (str(last), 0)]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in orjson.dumps(_messages_body()).decode()
    assert "cache_control" not in orjson.dumps(CHAT).decode()  # the spec's messages are not edited


def test_a_messages_body_has_the_forced_length_and_the_tools():
    body = _messages_body()
    assert body["max_tokens"] == 8 and body["min_tokens"] == 8 and body["ignore_eos"] is True
    assert body["stream"] is True and [t["name"] for t in body["tools"]] == ["read_file", "ls"]


def test_arguments_that_are_not_a_json_object_are_kept():
    calls = [{"id": "x", "function": {"name": "sh", "arguments": "not json"}}]
    _, turns = to_messages([{"role": "assistant", "content": "", "tool_calls": calls}])
    assert turns[0]["content"][0]["input"] == {"arguments": "not json"}
