"""The analyzer's token-space check for `api: messages` and `api: responses`: a server that turns
each body back into chat messages as vLLM does (Messages system blocks joined, one text block as
a string; Responses instructions as the system message, items as messages), renders the
template and tokenizes; the analyzer, rebuilding the prompts from the trace, must count the same
tokens (0 mismatches) and the same ideal as the server's hits."""

from __future__ import annotations

import pytest

from harness.analysis.ideal.walk import with_ideal
from harness.analysis.loader import load_run
from harness.analysis.summary import analyze_run
from tests.driver.agent_server import AgentServer
from tests.driver.helpers import replay, sess, trace
from tests.driver.sse_server import ServerConfig
from tests.trace.chat_fixtures import build_tokenizer, tokenizer_dir

TRACE = trace(sess("s1", [(6, 3, 0.0), (5, 2, 0.0), (4, 2, 0.0)], system=8))


def as_chat(api: str, body: dict) -> list[dict]:
    """The chat messages vLLM renders for a Messages or Responses body (text turns only)."""
    if api == "messages":
        system = "".join(b["text"] for b in body.get("system") or ())
        chat = [{"role": "system", "content": system}] if system else []
        for m in body["messages"]:
            texts = [b["text"] for b in m["content"] if b["type"] == "text"]
            chat.append({"role": m["role"], "content": texts[0] if len(texts) == 1 else texts})
        return chat
    chat = [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
    return chat + [{"role": i["role"], "content": i["content"]} for i in body["input"]]


class RenderingServer(AgentServer):
    def words(self, api: str, body: dict) -> list:
        text = "".join(f"<s>{m['role']}\n{m['content']}</s>\n" for m in as_chat(api, body))
        special = api == "responses"  # vLLM adds special tokens to a Responses prompt
        return build_tokenizer().encode(text + "<s>assistant\n", add_special_tokens=special).ids


@pytest.mark.parametrize("api", ["messages", "responses"])
@pytest.mark.slow
async def test_the_token_space_check_holds_for_messages_and_responses(tmp_path, api):
    server = RenderingServer(ServerConfig(block_size=4))
    await server.start()
    try:
        folder = tokenizer_dir(tmp_path / "tok")
        await replay(
            TRACE, server.url, tmp_path / "run", api=api, block_size=4, tokenizer=str(folder)
        )
    finally:
        await server.stop()
    records = with_ideal(load_run(tmp_path / "run"))[0].sort_values("turn")
    bos = 1 if api == "responses" else 0
    # 3 per message, 2 to generate (and the fixture's <bos> where the server adds it)
    assert records["prompt_tokens"].tolist() == [22 + bos, 36 + bos, 48 + bos]
    assert records["cached_tokens_ideal"].tolist() == records["cached_tokens"].tolist()
    assert records["cached_tokens"].tolist()[1:] == [20, 36]
    space = analyze_run(tmp_path / "run")["cache"]["token_space"]
    assert (space["space"], space["approximate"], space["prompt_token_mismatches"]) == (
        "server",
        False,
        0,
    )
    assert space["prompts_checked"] == 3 and api in space["reason"]


@pytest.mark.slow
async def test_server_kept_history_is_not_rebuilt(tmp_path):
    server = RenderingServer(ServerConfig(block_size=4))
    await server.start()
    try:
        await replay(
            TRACE,
            server.url,
            tmp_path / "run",
            api="responses",
            previous_response_id=True,
            target_kw={"previous_response_id": True},
            tokenizer=str(tokenizer_dir(tmp_path / "tok")),
        )
    finally:
        await server.stop()
    space = analyze_run(tmp_path / "run")["cache"]["token_space"]
    assert space["space"] == "trace" and "previous_response_id" in space["reason"]
