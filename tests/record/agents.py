"""Scripted agent loops on the official SDKs: what `harness record` is tested with.

The model behind (`harness serve`) answers in words and never calls a tool, so the script plays
the model's part in the history it sends back: after each reply it appends an assistant message
that calls a tool, runs the "tool" and sends its result, as a coding agent does. Every text the
scripts send holds `MARKER`, so a test can grep the recording for it.

- `openai_task`: chat completions with tools. A main session (4 turns, streamed and not: its
  last streamed without usage, so the recorder counts its output itself); after
  its turn 1 it calls Task twice: a *spawned* subagent (a fresh context of its own system prompt,
  2 turns) and then a *forked* one (the main session's context plus its task, 2 turns); turn 2
  joins both, turn 3 ends in text.
- `anthropic_task`: Messages with `tool_use` / `tool_result` blocks, 3 turns, streamed and not.
- `responses_task`: OpenAI Responses, 2 turns, the second sending the whole history.

Each returns what it sent: `Sent(api, n_requests, max_tokens)` per request, in order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MARKER = "zqxmarker"
MODEL = "agentic-harness-reference"
OUT = 6  # output tokens each request asks for (ignore_eos: exactly these)
SYSTEM = (
    f"You are a careful coding agent {MARKER}. Read files before you edit them, run the tests "
    "after each change, and keep the user informed. " * 6
)
SUB_SYSTEM = f"You are a search subagent {MARKER}: find what you are asked for and report. " * 4
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{doc} {MARKER}",
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string", "description": f"the {arg} {MARKER}"}},
                "required": [arg],
            },
        },
    }
    for name, doc, arg in (
        ("Read", "Read a file of the repository.", "path"),
        ("Bash", "Run a shell command.", "command"),
        ("Task", "Start a subagent on a task.", "prompt"),
    )
]


@dataclass
class Sent:
    api: str
    stream: bool


def _file(i: int) -> str:
    """A tool result: a file's lines, with the marker in them."""
    return "\n".join(f"{n:4d}\tdef step_{i}_{n}(x):  # {MARKER} line {n}" for n in range(1, 25))


def _call(cid: str, name: str, **args) -> dict:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _chat(client, messages: list[dict], stream: bool, sent: list[Sent], usage=True) -> str:
    sent.append(Sent("chat", stream))
    kw = dict(
        model=MODEL, messages=messages, tools=TOOLS, max_tokens=OUT, extra_body={"ignore_eos": True}
    )
    if not stream:
        return client.chat.completions.create(**kw).choices[0].message.content or ""
    options = {"stream_options": {"include_usage": True}} if usage else {}
    chunks = client.chat.completions.create(**kw, stream=True, **options)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def openai_task(client) -> list[Sent]:
    sent: list[Sent] = []
    main = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Fix the failing test in parser.py {MARKER}."},
    ]
    text = _chat(client, main, False, sent)
    main += [
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [_call("c1", "Read", path="parser.py")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": _file(1)},
    ]
    text = _chat(client, main, True, sent)  # turn 1: its reply starts two subagents
    tasks = [
        _call("c2", "Task", prompt=f"find the callers {MARKER}"),
        _call("c3", "Task", prompt=f"review the diff {MARKER}"),
    ]
    main.append({"role": "assistant", "content": text, "tool_calls": tasks})
    spawned = _subagent(
        client,
        [
            {"role": "system", "content": SUB_SYSTEM},
            {"role": "user", "content": f"Find the callers {MARKER}."},
        ],
        sent,
    )
    forked = _subagent(
        client,
        main + [{"role": "tool", "tool_call_id": "c3", "content": f"Review the diff {MARKER}."}],
        sent,
    )
    main += [
        {"role": "tool", "tool_call_id": "c2", "content": spawned},
        {"role": "tool", "tool_call_id": "c3", "content": forked},
    ]
    text = _chat(client, main, False, sent)  # turn 2: the join
    main += [
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [_call("c4", "Bash", command="pytest -q")],
        },
        {"role": "tool", "tool_call_id": "c4", "content": f"3 passed {MARKER}"},
    ]
    _chat(client, main, True, sent, usage=False)  # turn 3: the answer, streamed without usage
    return sent


def _subagent(client, messages: list[dict], sent: list[Sent]) -> str:
    text = _chat(client, messages, True, sent)
    messages = messages + [
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [_call("s1", "Bash", command="grep -rn parse")],
        },
        {"role": "tool", "tool_call_id": "s1", "content": _file(2)},
    ]
    return _chat(client, messages, False, sent)


def anthropic_task(client) -> list[Sent]:
    sent: list[Sent] = []
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in TOOLS
    ]
    messages: list[dict] = [{"role": "user", "content": f"What does main.py do {MARKER}?"}]
    for turn in range(3):
        stream = turn % 2 == 1
        sent.append(Sent("messages", stream))
        kw = dict(
            model=MODEL,
            max_tokens=OUT,
            system=SYSTEM,
            tools=tools,
            messages=messages,
            extra_body={"ignore_eos": True},
        )
        if stream:
            with client.messages.stream(**kw) as s:
                reply = s.get_final_message()
        else:
            reply = client.messages.create(**kw)
        text = "".join(b.text for b in reply.content if b.type == "text")
        use = {
            "type": "tool_use",
            "id": f"t{turn}",
            "name": "Read",
            "input": {"path": f"m{turn}.py"},
        }
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": text or "ok"}, use]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{turn}", "content": _file(turn)},
                    {"type": "text", "text": f"Go on {MARKER}."},
                ],
            },
        ]
    return sent


def responses_task(client) -> list[Sent]:
    sent: list[Sent] = []
    items: list[dict] = [{"role": "user", "content": f"Summarize the README {MARKER}."}]
    for turn in range(2):
        sent.append(Sent("responses", False))
        reply = client.responses.create(
            model=MODEL,
            instructions=SYSTEM,
            input=items,
            max_output_tokens=OUT,
            extra_body={"ignore_eos": True},
        )
        items += [
            {"role": "assistant", "content": reply.output_text or "ok"},
            {"role": "user", "content": f"Shorter {MARKER}, turn {turn}."},
        ]
    return sent
