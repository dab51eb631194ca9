"""The reference server driven by the official `openai` client: completions and chat, streaming
and not, usage with cached tokens, token-id and text prompts."""

from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from harness.engine.config import EngineConfig
from harness.serving.server import BackgroundServer
from harness.serving.tokenizer import Tokenizer
from harness.vocab import TOKEN_BASE, WORDS
from tests.waits import HANG_S

MODEL = "agentic-harness-reference"
TOK = Tokenizer()


@pytest.fixture(scope="module")
def server():
    config = EngineConfig(num_gpu_blocks=512, device="cpu", max_model_len=4096)
    with BackgroundServer(config) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(
        base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=HANG_S
    ) as c:
        yield c


def words(seed: int, n: int) -> list[int]:
    return [TOKEN_BASE + (seed * 7919 + k * 104729) % len(WORDS) for k in range(n)]


def test_models_and_health(client, server):
    assert [m.id for m in client.models.list().data] == [MODEL]
    with urllib.request.urlopen(f"{server.url}/health", timeout=HANG_S) as resp:
        assert resp.status == 200


def test_completion_with_token_ids_reports_usage_and_ids(client):
    prompt = words(1, 40)
    r = client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=6,
        extra_body={"ignore_eos": True, "return_token_ids": True},
    )
    choice = r.choices[0]
    assert choice.finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (40, 6, 46)
    assert r.usage.prompt_tokens_details.cached_tokens == 0
    assert r.model_extra["prompt_token_ids"] == prompt
    assert len(choice.token_ids) == 6 and choice.text == TOK.decode(choice.token_ids)


def test_text_prompt_is_the_same_request_as_its_token_ids(client):
    prompt = words(2, 50)
    by_ids = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=5, extra_body={"ignore_eos": True}
    )
    by_text = client.completions.create(
        model=MODEL, prompt=TOK.decode(prompt), max_tokens=5, extra_body={"ignore_eos": True}
    )
    batch_of_one = client.completions.create(
        model=MODEL, prompt=[prompt], max_tokens=5, extra_body={"ignore_eos": True}
    )
    assert by_text.choices[0].text == by_ids.choices[0].text == batch_of_one.choices[0].text
    assert by_text.usage.prompt_tokens == 50
    # the same ids: the text request hits the blocks the id request left (capped below 50)
    assert by_text.usage.prompt_tokens_details.cached_tokens == 48
    details = by_text.usage.prompt_tokens_details.model_extra
    assert details["cached_tokens_device"] + details["cached_tokens_cpu"] == 48


def test_streaming_completion_matches_non_streaming_and_ends_with_usage(client):
    prompt = words(3, 30)
    whole = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=8, extra_body={"ignore_eos": True}
    )
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt=prompt,
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    *content, final = chunks
    assert "".join(c.choices[0].text for c in content) == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in content][-1] == "length"
    assert all(c.usage is None for c in content)
    assert (
        final.choices == []
        and final.usage.completion_tokens == 8
        and final.usage.prompt_tokens == 30
    )
    assert (
        final.usage.prompt_tokens_details.cached_tokens == 16
    )  # the first request left 1 full block


def test_streaming_chat_opens_with_the_role_and_ends_with_usage(client):
    messages = [
        {"role": "system", "content": "the system of the file"},
        {"role": "user", "content": "read the code"},
    ]
    whole = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=7, extra_body={"ignore_eos": True}
    )
    assert (
        whole.choices[0].message.role == "assistant" and whole.choices[0].finish_reason == "length"
    )
    stream = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=7,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    first, *content, final = list(stream)
    assert first.choices[0].delta.role == "assistant" and first.choices[0].delta.content == ""
    assert "".join(c.choices[0].delta.content for c in content) == whole.choices[0].message.content
    assert content[-1].choices[0].finish_reason == "length"
    assert final.usage.completion_tokens == 7
    assert final.usage.prompt_tokens == whole.usage.prompt_tokens == 13  # 9 words + 4 template ids


def test_continuous_usage_counts_tokens_on_every_chunk(client):
    stream = client.completions.create(
        model=MODEL,
        prompt=words(4, 20),
        max_tokens=6,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        extra_body={"ignore_eos": True},
    )
    counts = [c.usage.completion_tokens for c in stream]
    assert counts[-1] == 6 and counts == sorted(counts) and len(counts) >= 2


def test_a_stop_token_ends_the_text_without_appearing_in_it(client):
    prompt = words(5, 24)
    free = client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=4,
        extra_body={"ignore_eos": True, "return_token_ids": True},
    )
    second = free.choices[0].token_ids[1]
    stopped = client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=4,
        extra_body={"ignore_eos": True, "return_token_ids": True, "stop_token_ids": [second]},
    )
    choice = stopped.choices[0]
    assert choice.finish_reason == "stop"
    assert (
        choice.token_ids == free.choices[0].token_ids[:2] and stopped.usage.completion_tokens == 2
    )
    assert choice.text == TOK.decode(free.choices[0].token_ids[:1])


def test_min_tokens_and_temperature_are_accepted(client):
    r = client.completions.create(
        model=MODEL,
        prompt=words(6, 10),
        max_tokens=5,
        temperature=0.8,
        seed=3,
        extra_body={"min_tokens": 5},
    )
    assert r.usage.completion_tokens == 5


def test_concurrent_requests_with_one_client_request_id_all_complete(client):
    def one(k: int):
        raw = client.completions.with_raw_response.create(
            model=MODEL,
            prompt=words(10 + k, 30 + k),
            max_tokens=5 + k,
            stream=k % 2 == 0,
            extra_body={"ignore_eos": True},
            extra_headers={"X-Request-Id": "trace-42"},
            **({"stream_options": {"include_usage": True}} if k % 2 == 0 else {}),
        )
        assert raw.headers["x-request-id"] == "trace-42"
        parsed = raw.parse()
        usage = list(parsed)[-1].usage if k % 2 == 0 else parsed.usage
        return usage.prompt_tokens, usage.completion_tokens

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    assert results == [(30 + k, 5 + k) for k in range(8)]


@pytest.mark.slow
def test_chat_without_max_tokens_fills_the_context_the_cache_can_hold(client):
    # 512 blocks x 16 = 8192 tokens of cache but max_model_len 4096: the rest of the context
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "the " * 4060}],
        extra_body={"ignore_eos": True},
    )
    assert r.usage.prompt_tokens == 4064 and r.usage.completion_tokens == 4096 - 4064


def test_tools_take_prompt_tokens_and_hit_the_cache_like_a_system_prompt(client):
    tools = [
        {"type": "function", "function": {"name": "run_test", "parameters": {"type": "object"}}}
    ] * 3
    messages = [{"role": "user", "content": "run the test"}]
    plain = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)
    first = client.chat.completions.create(
        model=MODEL, messages=messages, tools=tools, tool_choice="auto", max_tokens=2
    )
    again = client.chat.completions.create(
        model=MODEL,
        messages=messages + [{"role": "user", "content": "the"}],
        tools=tools,
        max_tokens=2,
    )
    assert first.usage.prompt_tokens > plain.usage.prompt_tokens + 100
    assert again.usage.prompt_tokens_details.cached_tokens == first.usage.prompt_tokens // 16 * 16


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_ends_the_text_before_it_and_stops_the_engine(client, stream):
    prompt = words(7, 20)
    free = client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=8,
        extra_body={"ignore_eos": True, "return_token_ids": True},
    ).choices[0]
    stop = TOK.decode(free.token_ids[3:5])
    expected = free.text[: free.text.index(stop)]
    kwargs = {
        "model": MODEL,
        "prompt": prompt,
        "max_tokens": 8,
        "stop": [stop, "never there"],
        "extra_body": {"ignore_eos": True},
    }
    if stream:
        chunks = list(
            client.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
        )
        text = "".join(c.choices[0].text for c in chunks[:-1])
        reason, usage = chunks[-2].choices[0].finish_reason, chunks[-1].usage
    else:
        r = client.completions.create(**kwargs)
        text, reason, usage = r.choices[0].text, r.choices[0].finish_reason, r.usage
    assert (text, reason) == (expected, "stop")
    assert usage.completion_tokens < 8
