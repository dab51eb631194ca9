"""The ideal in the server's tokens for chat: a chat template rendered locally vs a test server that
applies the same template (written out by hand here) and reports prompt_tokens / cached_tokens.

The trace: one session, an 8-token system prompt, turn 0 (6 new tokens, 3 output), turn 1 (5 new
tokens). In the fixture tokenizer every content word is one token and a message costs 3 more
(<s>, role, </s>), the generation prompt 2 (<s> assistant):

    turn 0: system 8+3, user 6+3, prompt 2                       = 22 server tokens (14 trace)
    turn 1: system 8+3, user 6+3, assistant 3+3, user 5+3, + 2   = 36 server tokens (22 trace)

Turn 0's 22 tokens are a prefix of turn 1's; at block 4 the server hits 20 of them, which is
the ideal in server tokens. In trace tokens the ideal would be 12 (14 shared, floored to 4).
"""

from __future__ import annotations

import pytest

from harness.analysis.ideal.walk import with_ideal
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze, analyze_run
from harness.errors import InputError
from harness.report.html import render_report
from harness.report.text import summary_table
from harness.trace.model import Trace, TraceHeader
from tests.driver.helpers import replay, sess, trace
from tests.driver.sse_server import ServerConfig, SSETestServer
from tests.trace.chat_fixtures import TEMPLATE, build_tokenizer, tokenizer_dir

TRACE = trace(sess("s1", [(6, 3, 0.0), (5, 2, 0.0)], system=8))


class TemplateServer(SSETestServer):
    """Counts a chat prompt as a server would: the template applied (by hand), then tokenized."""

    def __init__(self, *, add_bos: bool = False) -> None:
        super().__init__(ServerConfig(block_size=4))
        self.tokenizer = build_tokenizer()
        self.add_bos = add_bos

    def _tokens(self, body: dict) -> list:
        if isinstance(body.get("prompt"), str):  # a completions text prompt: BOS added
            return self.tokenizer.encode(body["prompt"]).ids
        if "messages" not in body:
            return super()._tokens(body)
        text = (
            "".join(f"<s>{m['role']}\n{m['content']}</s>\n" for m in body["messages"])
            + "<s>assistant\n"
        )
        return self.tokenizer.encode(text, add_special_tokens=self.add_bos).ids


@pytest.fixture
async def template_server():
    servers = []

    async def start(**kw) -> SSETestServer:
        server = TemplateServer(**kw)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


def _by_turn(run_dir, **kw):
    records = with_ideal(load_run(run_dir), **kw)[0].sort_values("turn")
    return {
        c: records[c].tolist()
        for c in ("prompt_tokens", "prompt_tokens_expected", "cached_tokens", "cached_tokens_ideal")
    }


def _report_cache_section(run_dir, **kw) -> str:
    text = render_report([analyze(load_run(run_dir), **kw)])
    return text[
        text.index("<h2>What the cache did</h2>") : text.index("<h2>What load was held</h2>")
    ]


@pytest.mark.slow
async def test_ideal_in_server_tokens_from_the_runs_tokenizer_folder(template_server, tmp_path):
    server = await template_server()
    folder = tokenizer_dir(tmp_path / "tok")
    await replay(
        TRACE, server.url, tmp_path / "run", api="chat", block_size=4, tokenizer=str(folder)
    )
    got = _by_turn(tmp_path / "run")
    assert got == {
        "prompt_tokens": [22, 36],
        "prompt_tokens_expected": [22, 36],
        "cached_tokens": [0, 20],
        "cached_tokens_ideal": [0, 20],
    }
    summary = analyze_run(tmp_path / "run")
    space = summary["cache"]["token_space"]
    assert (
        space["space"],
        space["approximate"],
        space["prompts_checked"],
        space["prompt_token_mismatches"],
    ) == ("server", False, 2, 0)
    assert summary["cache_hit_rate"] == summary["ideal_cache_hit_rate"] == 20 / 58
    assert "2 prompt_tokens checked against the local count, 0 differ" in summary_table(summary)


@pytest.mark.slow
async def test_a_run_whose_tokenizer_folder_is_gone(template_server, tmp_path):
    server = await template_server()
    folder = tokenizer_dir(tmp_path / "tok")
    await replay(
        TRACE, server.url, tmp_path / "run", api="chat", block_size=4, tokenizer=str(folder)
    )
    folder.rename(tmp_path / "moved")
    space = analyze_run(tmp_path / "run")["cache"]["token_space"]
    assert space["approximate"] and "is not there" in space["reason"]
    space = analyze_run(tmp_path / "run", tokenizer=str(tmp_path / "moved"))["cache"]["token_space"]
    assert (space["space"], space["prompt_token_mismatches"]) == ("server", 0)
    with pytest.raises(InputError, match="no such tokenizer"):
        analyze_run(tmp_path / "run", tokenizer=str(folder))


@pytest.mark.slow
async def test_a_server_that_adds_a_bos_is_reported_as_a_mismatch(template_server, tmp_path):
    server = await template_server(add_bos=True)
    await replay(TRACE, server.url, tmp_path / "run", api="chat", block_size=4)
    folder = tokenizer_dir(tmp_path / "tok")
    assert _by_turn(tmp_path / "run", tokenizer=str(folder))["prompt_tokens"] == [23, 37]
    summary = analyze_run(tmp_path / "run", tokenizer=str(folder))
    space = summary["cache"]["token_space"]
    assert space["prompt_token_mismatches"] == 2
    first = space["first_mismatch"]
    assert (first["prompt_tokens"], first["local"]) in ((23, 22), (37, 36))
    assert "2 differ (first: request" in summary_table(summary)
    assert "2 differ (first: request" in _report_cache_section(
        tmp_path / "run", tokenizer=str(folder)
    )


@pytest.mark.slow
async def test_without_a_template_the_chat_ideal_is_approximate(template_server, tmp_path):
    server = await template_server()
    await replay(TRACE, server.url, tmp_path / "run", api="chat", block_size=4)
    folder = tokenizer_dir(tmp_path / "tok", template=None)
    got = _by_turn(tmp_path / "run", tokenizer=str(folder))
    # trace tokens: 14 and 22, ideal 12 at block 4, scaled to the server's 36 tokens
    assert got["prompt_tokens_expected"] == [14, 22]
    assert got["cached_tokens_ideal"] == pytest.approx([0, 12 * 36 / 22])
    summary = analyze_run(tmp_path / "run")
    assert summary["cache"]["token_space"]["approximate"] is True
    assert "APPROXIMATE, compare rates not token counts: no tokenizer" in summary_table(summary)
    assert "APPROXIMATE, compare rates not token counts: no tokenizer" in _report_cache_section(
        tmp_path / "run"
    )


@pytest.mark.slow
async def test_token_id_prompts_stay_in_trace_tokens(template_server, tmp_path):
    server = await template_server()
    await replay(TRACE, server.url, tmp_path / "run", api="completions", block_size=4)
    summary = analyze_run(tmp_path / "run", tokenizer=str(tokenizer_dir(tmp_path / "tok")))
    space = summary["cache"]["token_space"]
    assert (space["space"], space["approximate"]) == ("trace", False)
    assert summary["cache_hit_rate"] == summary["ideal_cache_hit_rate"] == 12 / 36


@pytest.mark.slow
async def test_text_prompts_counted_with_the_bos(template_server, tmp_path):
    server = await template_server()
    await replay(
        TRACE, server.url, tmp_path / "run", api="completions", prompt_format="text", block_size=4
    )
    got = _by_turn(tmp_path / "run", tokenizer=str(tokenizer_dir(tmp_path / "tok", template=None)))
    # <bos> + 14 words, then <bos> + 22 words; turn 0's 15 tokens are a prefix of turn 1's
    assert got == {
        "prompt_tokens": [15, 23],
        "prompt_tokens_expected": [15, 23],
        "cached_tokens": [0, 12],
        "cached_tokens_ideal": [0, 12],
    }


class ToolTemplateServer(TemplateServer):
    """Renders chat as vLLM does with harness/data/gemma3_tools.jinja (written out here with
    plain jinja2, tool-call arguments parsed first); `drop_tools` forgets the schemas."""

    def __init__(self, *, drop_tools: bool = False) -> None:
        super().__init__()
        self.drop_tools = drop_tools

    def _tokens(self, body: dict) -> list:
        from tests.trace.test_tool_turns import _vllm_render

        if "messages" not in body:
            return super()._tokens(body)
        tools = None if self.drop_tools else body.get("tools")
        text = _vllm_render(body["messages"], tools)
        return self.tokenizer.encode(text, add_special_tokens=False).ids


class BareTemplateServer(TemplateServer):
    """Renders chat with `TEMPLATE`, which prints each content bare, as vLLM does: a null
    content (a turn that only calls tools) is rendered empty."""

    def _tokens(self, body: dict) -> list:
        if "messages" not in body:
            return super()._tokens(body)
        text = "".join(f"<s>{m['role']}\n{m.get('content') or ''}</s>\n" for m in body["messages"])
        return self.tokenizer.encode(text + "<s>assistant\n", add_special_tokens=False).ids


# a main session whose turn 1 forks a subagent (Task call, its report joined at turn 2); a
# 120-token system prompt holds one tool schema (harness/trace/tool_set.py)
TOOL_TRACE = Trace(
    TraceHeader(seed=7, meta={"knobs": {"turn_form": "tools"}}),
    (
        sess("s1", [(6, 3, 0.0), (5, 70, 0.0, ("s1.a1",)), (4, 2, 0.0), (3, 2, 0.0)], system=120),
        sess(
            "s1.a1", [(5, 4, 0.0), (4, 6, 0.0)], system=120, parent="s1", fork_turn=1, mode="fork"
        ),
    ),
)


# Bash and Read fit a 200-token system prompt; a 2-token Bash call has no text (content None)
NULL_TRACE = Trace(
    TraceHeader(seed=7, meta={"knobs": {"turn_form": "tools"}}),
    (sess("s1", [(6, 2, 0.0), (5, 2, 0.0), (4, 2, 0.0), (3, 2, 0.0), (3, 2, 0.0)], system=200),),
)


async def _tool_run(tmp_path, server: SSETestServer, template: str, tr=TOOL_TRACE) -> dict:
    await server.start()
    try:
        folder = tokenizer_dir(tmp_path / "tok", template=template)
        await replay(tr, server.url, tmp_path / "run", api="chat", tokenizer=str(folder))
    finally:
        await server.stop()
    assert all("tools" in e["body"] for e in server.log)
    return analyze_run(tmp_path / "run")


@pytest.mark.slow
async def test_tool_shaped_chat_is_counted_with_its_tools_and_calls(tmp_path):
    from tests.trace.test_tool_turns import GEMMA_TOOLS

    summary = await _tool_run(tmp_path, ToolTemplateServer(), GEMMA_TOOLS)
    space = summary["cache"]["token_space"]
    assert (space["space"], space["prompt_token_mismatches"]) == ("server", 0)
    assert space["prompts_checked"] == 6 and not space["approximate"]


@pytest.mark.slow
async def test_a_null_content_is_rendered_empty_as_the_server_does(tmp_path):
    # TEMPLATE prints content bare: rendering a tool-only turn's None would print "None"
    server = BareTemplateServer()
    summary = await _tool_run(tmp_path, server, TEMPLATE, NULL_TRACE)
    sent = [m for e in server.log for m in e["body"]["messages"]]
    assert any(m["role"] == "assistant" and m["content"] is None for m in sent)
    space = summary["cache"]["token_space"]
    assert (space["prompts_checked"], space["prompt_token_mismatches"]) == (5, 0)
    assert not any("token space" in w for w in summary["warnings"])


@pytest.mark.slow
async def test_a_server_that_drops_the_tools_is_a_mismatch_and_a_warning(tmp_path):
    from tests.trace.test_tool_turns import GEMMA_TOOLS

    summary = await _tool_run(tmp_path, ToolTemplateServer(drop_tools=True), GEMMA_TOOLS)
    space = summary["cache"]["token_space"]
    assert space["prompt_token_mismatches"] == space["prompts_checked"] > 0
    assert space["approximate"] and "the ideal is approximate" in space["reason"]
    warning = next(w for w in summary["warnings"] if w.startswith("token space:"))
    assert f"{space['prompts_checked']} of {space['prompts_checked']} prompts" in warning
    assert "APPROXIMATE, server's tokens" in summary_table(summary)
