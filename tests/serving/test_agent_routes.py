"""The reference server's /v1/messages, /v1/responses and Gemini's streamGenerateContent: the
official openai client reads its Responses stream, and the harness's own targets replay a trace
through each route with the same prompt lengths and cache hits as through chat (one rendered
conversation)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.replay_into import run_replay
from harness.engine.config import EngineConfig
from harness.serving.server import BackgroundServer
from tests.driver.helpers import TEST_TIMEOUTS, load_records, sess, trace
from tests.waits import HANG_S

MODEL = "agentic-harness-reference"
TRACE = trace(sess("a", [(40, 4, 0), (24, 4, 0), (16, 3, 0)], system=48))


@pytest.fixture(scope="module")
def server():
    config = EngineConfig(num_gpu_blocks=512, device="cpu", max_model_len=4096)
    with BackgroundServer(config) as running:
        yield running


@pytest.mark.slow
def test_the_openai_client_reads_a_responses_stream(server):
    import openai  # here, not at collection: its import is seconds of CPU

    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client:
        stream = client.responses.create(
            model=MODEL,
            instructions="Be brief.",
            input=[{"role": "user", "content": "hello there"}],
            max_output_tokens=5,
            stream=True,
            extra_body={"ignore_eos": True},
        )
        events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") >= 1
    usage = events[-1].response.usage
    assert usage.output_tokens == 5 and usage.input_tokens > 0
    assert usage.input_tokens_details.cached_tokens == 0


@pytest.mark.slow
def test_the_openai_stream_helper_builds_the_response_as_it_streams(server):
    # responses.stream() accumulates the output item by item: it refuses a text delta before
    # its output item and content part were announced, as OpenAI and vLLM announce them
    import openai

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    ask = {"model": MODEL, "input": [{"role": "user", "content": "hello there"}]}
    ask |= {"max_output_tokens": 5, "extra_body": {"ignore_eos": True}}
    with client, client.responses.stream(**ask) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas and final.output_text == deltas
    assert final.usage is not None and final.usage.output_tokens == 5


def _post(server, path: str, body: dict) -> list[dict]:
    import urllib.request

    req = urllib.request.Request(
        f"{server.url}{path}", orjson.dumps(body), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=HANG_S) as resp:
        lines = resp.read().split(b"\n")
    return [orjson.loads(line[6:]) for line in lines if line.startswith(b"data: ")]


def test_a_messages_stream_in_anthropics_order_with_its_usage(server):
    body = {
        "model": MODEL,
        "max_tokens": 4,
        "stream": True,
        "ignore_eos": True,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read it"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"p": "a"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}],
            },
        ],
        "tools": [{"name": "read", "input_schema": {"type": "object"}}],
    }
    events = _post(server, "/v1/messages", body)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    usage = events[-2]["usage"]
    assert usage["output_tokens"] == 4 and usage["cache_read_input_tokens"] == 0
    assert usage["input_tokens"] == events[0]["message"]["usage"]["input_tokens"]


def test_a_gemini_stream_with_its_running_usage(server):
    import urllib.request

    with urllib.request.urlopen(f"{server.url}/v1beta/models", timeout=HANG_S) as resp:
        listed = orjson.loads(resp.read())["models"]
    assert [m["name"] for m in listed] == [f"models/{MODEL}"]
    body = {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "read it"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read", "args": {"p": "a"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "read",
                                                            "response": {"output": "x = 1"}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "read", "parametersJsonSchema": {}}]}],
        "generationConfig": {"maxOutputTokens": 4},
    }  # fmt: skip
    chunks = _post(server, f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse", body)
    counts = [c["usageMetadata"]["candidatesTokenCount"] for c in chunks]
    assert counts == sorted(counts) and 0 < counts[-1] <= 4  # running; EOS may end it early
    assert chunks[-1]["candidates"][0]["finishReason"] in ("STOP", "MAX_TOKENS")
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    assert chunks[-1]["usageMetadata"]["promptTokenCount"] > 0


@pytest.mark.slow
def test_non_streamed_requests_get_their_apis_body(server):
    """As vLLM answers them: a Messages message and a Responses response, with usage, read by
    the official SDKs; the same prompt counts the same tokens through either."""
    import anthropic
    import openai

    ask = {"max_tokens": 4, "extra_body": {"ignore_eos": True}}
    with anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0) as client:
        message = client.messages.create(
            model=MODEL, system="Be brief.", messages=[{"role": "user", "content": "hello"}], **ask
        )
    assert message.type == "message" and message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 4 and message.content[0].type == "text"
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client:
        response = client.responses.create(
            model=MODEL,
            instructions="Be brief.",
            input="hello",
            max_output_tokens=4,
            extra_body={"ignore_eos": True},
        )
    assert response.status == "completed" and response.usage.output_tokens == 4
    assert response.output_text == response.output[0].content[0].text
    total = message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0)
    assert response.usage.input_tokens == total


@pytest.mark.parametrize("api", ["messages", "responses", "gemini"])
@pytest.mark.slow
def test_a_replay_through_the_route_matches_chat(server, tmp_path, api):
    runs = {}
    for k, name in enumerate(("chat", api)):  # salts of one length: fresh prefixes, same counts
        config = HTTPTargetConfig(
            endpoints=(server.url,), model=MODEL, api=name, timeouts=TEST_TIMEOUTS
        )
        replay = ReplayConfig(api=name, salt=f"{api[0]}{k}", run_id="t")
        asyncio.run(run_replay(TRACE, HTTPTarget(config), replay, tmp_path / name))
        runs[name] = sorted(load_records(tmp_path / name), key=lambda r: r["turn"])
    for chat, other in zip(runs["chat"], runs[api], strict=True):
        assert other["status"] == "ok" and other["completion_tokens"] == chat["completion_tokens"]
        assert sum(other["chunk_tokens"]) == other["completion_tokens"]
        assert other["prompt_tokens"] == chat["prompt_tokens"]  # one rendered conversation
        assert other["cached_tokens"] == chat["cached_tokens"]
    assert runs[api][-1]["cached_tokens"] > 0
