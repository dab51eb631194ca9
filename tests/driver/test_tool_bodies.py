"""What goes on the wire for tool-shaped turns and source-code content (a loopback server logs
the bodies): chat bodies carry `tools`, assistant `tool_calls` and role `tool` results; a
`content: code` trace sends Python source, as text and as token ids."""

from __future__ import annotations

import json

import pytest

from harness.trace.chat_form import ChatForm
from harness.trace.content import Content
from harness.trace.tool_set import system_tools
from tests.driver.helpers import replay
from tests.trace.tiny import no_think, small_generated


@pytest.mark.slow
async def test_chat_bodies_carry_tools_tool_calls_and_tool_results(make_server, tmp_path):
    srv = await make_server()
    trace = no_think(small_generated(sessions=2, seed=5, content="code", turn_form="tools"))
    _, records, _ = await replay(trace, srv.url, tmp_path, concurrency=2, api="chat")
    assert {r["status"] for r in records} == {"ok"} and len(srv.log) == trace.num_requests
    content = Content(trace)
    for e in srv.log:
        body = e["body"]
        sid, turn = e["request_id"].rsplit(":", 1)
        assert body["messages"] == ChatForm(content).messages(sid, int(turn)), e["request_id"]
        s = trace.session(sid)  # a scaled system prompt's scaled tool set (trace/tool_set.py)
        assert body["tools"] == system_tools(trace.header.seed, s.system_id, s.system_tokens)
        assert body["messages"][0]["role"] == "system" and body["messages"][0]["content"]
    last = max(srv.log, key=lambda e: len(e["body"]["messages"]))["body"]["messages"]
    calls = [c for m in last if m["role"] == "assistant" for c in m["tool_calls"]]
    results = {m["tool_call_id"] for m in last if m["role"] == "tool"}
    assert calls and {c["id"] for c in calls} <= results
    assert all(json.loads(c["function"]["arguments"]) for c in calls)


@pytest.mark.slow
async def test_a_code_trace_sends_python_source(make_server, tmp_path):
    srv = await make_server()
    trace = no_think(small_generated(sessions=1, seed=5, content="code"))
    await replay(trace, srv.url, tmp_path / "chat", api="chat")
    text = "\n".join(m["content"] for e in srv.log for m in e["body"]["messages"])
    for marker in ("def ", "import ", "return", "self."):
        assert marker in text, marker
    assert all("tools" not in e["body"] for e in srv.log)  # plain turns: no tool schemas
    srv.log.clear()
    await replay(trace, srv.url, tmp_path / "ids", api="completions")
    content = Content(trace)
    for e in srv.log:
        sid, turn = e["request_id"].rsplit(":", 1)
        assert e["body"]["prompt"] == content.prompt_token_ids(sid, int(turn))


async def _cli_replay(trace, url: str, run, *extra: str) -> tuple[int, str]:
    import asyncio
    import sys
    from asyncio.subprocess import PIPE

    from harness.trace.native import write_trace

    path = run.with_suffix(".jsonl")
    write_trace(trace, path)
    args = ["replay", path, "--endpoint", url, "--model", "m", "--api", "chat", "-o", run, *extra]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "harness", *map(str, args), stdout=PIPE, stderr=PIPE
    )
    _, err = await proc.communicate()
    return proc.returncode or 0, err.decode()


@pytest.mark.slow
async def test_tool_choice_goes_with_the_tools_and_only_with_them(make_server, tmp_path):
    srv = await make_server()
    tools = no_think(small_generated(sessions=1, seed=5, content="code", turn_form="tools"))
    rc, err = await _cli_replay(tools, srv.url, tmp_path / "tools", "--tool-choice", "required")
    assert rc == 0, err
    sent = [e["body"] for e in srv.log if e["request_id"] != "preflight"]  # a probe, no tools
    assert sent and all(b["tool_choice"] == "required" and b["tools"] for b in sent)
    srv.log.clear()
    plain = no_think(small_generated(sessions=1, seed=5, content="code"))
    rc, err = await _cli_replay(plain, srv.url, tmp_path / "plain", "--tool-choice", "auto")
    assert rc == 0, err
    assert srv.log and all("tool_choice" not in e["body"] for e in srv.log)
    srv.log.clear()
    rc, _ = await _cli_replay(tools, srv.url, tmp_path / "default")
    assert rc == 0 and all("tool_choice" not in e["body"] for e in srv.log)


@pytest.mark.slow
async def test_an_unknown_tool_choice_is_refused_before_sending(make_server, tmp_path):
    srv = await make_server()
    tools = no_think(small_generated(sessions=1, seed=5, content="code", turn_form="tools"))
    rc, err = await _cli_replay(tools, srv.url, tmp_path / "bad", "--tool-choice", "always")
    assert rc == 2 and "tool_choice" in err and "Traceback" not in err and not srv.log
