"""`turn_form: tools`: tool schemas, tool calls and their results in chat prompts, and the Gemma
template that renders them (harness/data/gemma3_tools.jinja)."""

from __future__ import annotations

import json
from importlib import resources

import jinja2
import pytest

from harness.trace.chat_form import ChatForm
from harness.trace.chat_tokens import ChatTokenizer
from harness.trace.content import Content
from harness.trace.requests import RequestSource
from harness.trace.tool_calls import CATALOG, CORE, session_tools
from harness.trace.tool_set import system_tools

from .chat_fixtures import tokenizer_dir
from .tiny import small_generated

GEMMA_TOOLS = resources.files("harness").joinpath("data/gemma3_tools.jinja").read_text()


@pytest.fixture(scope="module", params=["words", "code"])
def trace(request):
    return small_generated(sessions=5, seed=5, content=request.param, turn_form="tools")


def _calls(msg: dict) -> list[dict]:
    return msg.get("tool_calls") or []


def test_every_turn_but_the_last_calls_a_tool_and_the_next_input_is_its_result(trace):
    content = Content(trace)
    for s in trace.main_sessions:
        msgs = ChatForm(content).messages(s.id, len(s.turns) - 1)
        assistants = [k for k, m in enumerate(msgs) if m["role"] == "assistant"]
        assert len(assistants) == len(s.turns) - 1
        for k in assistants:
            calls = _calls(msgs[k])
            assert calls, msgs[k]
            answered = [m["tool_call_id"] for m in msgs[k + 1 : k + 1 + len(calls)]]
            assert answered == [c["id"] for c in calls]
            for c in calls:
                assert c["type"] == "function"
                assert isinstance(json.loads(c["function"]["arguments"]), dict)


def test_a_join_answers_each_task_call_with_its_subagents_report(trace):
    content = Content(trace)
    s, k = next((s, k) for s in trace.main_sessions for k, t in enumerate(s.turns) if t.spawns)
    msgs = ChatForm(content).messages(s.id, k + 1)
    call_msg = next(m for m in reversed(msgs) if m["role"] == "assistant")
    calls = _calls(call_msg)
    assert [c["function"]["name"] for c in calls] == ["Task"] * len(s.turns[k].spawns)
    for c, child_id in zip(calls, s.turns[k].spawns, strict=True):
        child = trace.session(child_id)
        report = content.output_text(child_id, len(child.turns) - 1)
        result = next(m for m in msgs if m.get("tool_call_id") == c["id"])
        assert result["content"] == report[: len(result["content"])]


def test_a_fork_starts_from_its_parents_prompt_and_answers_every_call(trace):
    content = Content(trace)
    for child in (s for s in trace.sessions if s.mode == "fork"):
        parent = ChatForm(content).messages(child.parent, child.fork_turn)
        msgs = ChatForm(content).messages(child.id, 0)
        assert msgs[: len(parent)] == parent
        calls = _calls(msgs[len(parent)])
        results = msgs[len(parent) + 1 :]
        assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]
        assert sum(bool(m["content"]) for m in results) <= 1  # only its own task has text


@pytest.mark.slow
def test_prompts_extend_and_carry_the_tools_of_their_system_prompt(trace):
    src = RequestSource(trace, api="chat")
    for s in trace.sessions:
        prev = src.prompt(s.id, 0)
        assert prev.tools == system_tools(trace.header.seed, s.system_id, s.system_tokens)
        for k in range(1, len(s.turns)):
            p = src.prompt(s.id, k)
            assert p.messages[: len(prev.messages)] == prev.messages and p.tools == prev.tools
            prev = p


def test_tools_follow_the_system_prompt():
    a, b = session_tools(1, "sys0"), session_tools(1, "sys0")
    assert a == b and {t["function"]["name"] for t in a} >= CORE
    assert len({json.dumps(session_tools(1, f"sys{j}")) for j in range(8)}) > 1
    assert all(t in CATALOG for t in a)


def test_plain_turns_send_no_tools():
    tr = small_generated(sessions=2, seed=5)
    p = RequestSource(tr, api="chat").prompt("s000000", 1)
    assert p.tools is None and all("tool_calls" not in m for m in p.messages)


def test_live_replies_replace_the_text_and_keep_the_call(trace):
    src = RequestSource(trace, api="chat", live=True)
    s = next(s for s in trace.main_sessions if len(s.turns) > 2)
    first = src.prompt(s.id, 0)
    src.reply(s.id, 0, "a live reply")
    msg = src.prompt(s.id, 1).messages[len(first.messages)]
    trace_msg = ChatForm(Content(trace)).messages(s.id, 1)[len(first.messages)]
    assert msg["content"] == "a live reply" and msg["tool_calls"] == trace_msg["tool_calls"]


def _vllm_render(messages, tools) -> str:
    """The template as vLLM applies it, written out independently: plain jinja2 with
    transformers' options, arguments parsed to objects first."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)
    parsed = [
        {
            **m,
            "tool_calls": [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in m["tool_calls"]
            ],
        }
        if m.get("tool_calls")
        else m
        for m in messages
    ]
    return env.from_string(GEMMA_TOOLS).render(
        messages=parsed, tools=tools, add_generation_prompt=True, bos_token="<bos>"
    )


@pytest.mark.slow
def test_the_gemma_template_renders_tools_calls_and_results(trace, tmp_path):
    tok = ChatTokenizer.load(tokenizer_dir(tmp_path / "tok", template=GEMMA_TOOLS))
    src = RequestSource(trace, api="chat")
    s = trace.main_sessions[0]
    prev = ""
    for k in range(len(s.turns)):
        p = src.prompt(s.id, k)
        text = tok.render(p.messages, tools=p.tools)
        assert text == _vllm_render(p.messages, p.tools)
        assert text.startswith(prev or "<bos>")  # a prompt extends the one before
        prev = text
    assert '<tool_call>{"name": "' in text and "<tool_response>\n" in text
    assert '{"name": "Read", ' in text  # the schemas open the first user turn
    assert text.count("<start_of_turn>model\n") == len(s.turns)


def test_the_template_sees_arguments_as_objects_as_vllm_passes_them(tmp_path):
    template = "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.arguments | tojson }}|{% endfor %}{% endfor %}"
    tok = ChatTokenizer.load(tokenizer_dir(tmp_path / "tok", template=template))
    calls = [
        {"id": "a", "type": "function", "function": {"name": "Read", "arguments": '{"x": 1}'}},
        {"id": "b", "type": "function", "function": {"name": "Read", "arguments": "not json"}},
    ]
    msgs = [{"role": "assistant", "content": None, "tool_calls": calls}]
    assert tok.render(msgs) == '{"x": 1}|{}|'
    assert msgs[0]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'  # not changed


def test_a_trace_asking_for_an_unknown_content_is_refused():
    from harness.errors import InputError
    from harness.trace.model import Trace, TraceHeader

    tr = Trace(TraceHeader(seed=1, meta={"knobs": {"content": "prose"}}), ())
    with pytest.raises(InputError, match="prose"):
        Content(tr)
