"""Prefix caching seen through the API: a trace's sessions replayed twice, through chat and through
completions, report `cached_tokens` covering the shared prefix on every turn after the first, and
`/metrics` agrees with the sum of what the responses reported."""

from __future__ import annotations

import urllib.request

import openai
import pytest

from harness.engine.config import EngineConfig
from harness.prometheus import metric_total
from harness.serving.chat_template import apply_chat_template
from harness.serving.server import BackgroundServer
from harness.serving.tokenizer import Tokenizer
from harness.trace.chat_form import ChatForm
from harness.trace.content import Content
from harness.trace.model import Session, Trace, TraceHeader, Turn
from tests.waits import HANG_S

MODEL = "agentic-harness-reference"
BLOCK = 16


def trace() -> Trace:
    main = Session(
        "main",
        0.0,
        37,
        "sys",
        (
            Turn(29, 6),
            Turn(21, 5, spawns=("fork",)),
            Turn(18, 4),
            Turn(40, 3),
        ),
    )
    fork = Session(
        "fork", 0.0, 37, "sys", (Turn(12, 4), Turn(9, 3)), parent="main", fork_turn=1, mode="fork"
    )
    other = Session(
        "other", 0.0, 37, "sys", (Turn(25, 4), Turn(14, 3))
    )  # shares only the system prompt
    return Trace(TraceHeader(seed=11), (main, fork, other))


def expected_cached(prompt: list[int], earlier: list[list[int]]) -> int:
    """The oracle: the longest prefix shared with an earlier prompt, capped so one token is
    computed, in whole blocks."""
    best = 0
    for old in earlier:
        n = 0
        for a, b in zip(prompt, old, strict=False):
            if a != b:
                break
            n += 1
        best = max(best, n)
    return min(best, len(prompt) - 1) // BLOCK * BLOCK


class Replay:
    def __init__(self, client: openai.OpenAI, content: Content) -> None:
        self.client, self.content = client, content
        self.sent: list[list[int]] = []  # prompts in token ids, in send order
        self.usages = []

    def turn(self, api: str, sid: str, k: int) -> tuple[int, int]:
        """Sends one turn; returns (cached_tokens reported, the oracle's)."""
        max_tokens = self.content.trace.session(sid).turns[k].output_tokens
        if api == "chat":
            messages = ChatForm(self.content).messages(sid, k)
            prompt = apply_chat_template(messages, Tokenizer())
            stream = self.client.chat.completions.create(
                model=MODEL,
                messages=messages,
                max_tokens=max_tokens,
                stream=True,
                stream_options={"include_usage": True},
                extra_body={"ignore_eos": True},
            )
            usage = list(stream)[-1].usage
        else:
            prompt = self.content.prompt_token_ids(sid, k)
            text = api == "text"
            usage = self.client.completions.create(
                model=MODEL,
                prompt=self.content.prompt_text(sid, k) if text else prompt,
                max_tokens=max_tokens,
                extra_body={"ignore_eos": True},
            ).usage
        assert usage.prompt_tokens == len(prompt)
        expected = expected_cached(prompt, self.sent)
        self.sent.append(prompt)
        self.usages.append(usage)
        return usage.prompt_tokens_details.cached_tokens, expected


@pytest.fixture(scope="module")
def server():
    config = EngineConfig(num_gpu_blocks=512, device="cpu", max_model_len=2048, debug_checks=True)
    with BackgroundServer(config) as running:
        yield running


@pytest.fixture(scope="module")
def replay(server):
    with openai.OpenAI(
        base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=HANG_S
    ) as client:
        yield Replay(client, Content(trace()))


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.slow
def test_a_session_replayed_twice_hits_the_shared_prefix_on_every_later_turn(replay, api):
    sessions = replay.content.trace.sessions
    for rep in range(2):
        for s in sessions:
            for k in range(len(s.turns)):
                cached, expected = replay.turn(api, s.id, k)
                assert cached == expected, (api, rep, s.id, k)
                prompt_len = replay.usages[-1].prompt_tokens
                if k > 0 or rep > 0:
                    # everything but the new input (+ 3 template ids around it) and a block is cached
                    new = s.turns[k].new_input_tokens + 3
                    assert cached >= prompt_len - new - BLOCK, (api, rep, s.id, k)
                if rep > 0:
                    assert cached == (prompt_len - 1) // BLOCK * BLOCK


@pytest.mark.slow  # reads what the slow test above sent: runs only with it
def test_text_prompts_hit_what_token_id_prompts_left(replay):
    # after the completions test, the text of the same turns is the same ids: fully cached
    for s in replay.content.trace.sessions:
        cached, expected = replay.turn("text", s.id, len(s.turns) - 1)
        assert cached == expected == (replay.usages[-1].prompt_tokens - 1) // BLOCK * BLOCK


@pytest.mark.slow  # reads what the slow test above sent: runs only with it
def test_metrics_hit_counter_is_the_sum_of_reported_cached_tokens(replay, server):
    assert len(replay.usages) > 20
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=HANG_S) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    cached = sum(u.prompt_tokens_details.cached_tokens for u in replay.usages)
    assert cached > 0
    assert metric_total(text, "vllm:prefix_cache_hits_total") == cached
    assert metric_total(text, "harness:cached_tokens_reported_total") == cached
    assert metric_total(text, "vllm:prefix_cache_queries_total") == sum(
        u.prompt_tokens for u in replay.usages
    )
    assert metric_total(text, "vllm:generation_tokens_total") == sum(
        u.completion_tokens for u in replay.usages
    )
    assert metric_total(text, "vllm:request_success_total", finished_reason="length") == len(
        replay.usages
    )
    assert metric_total(text, "vllm:num_requests_running") == 0
    assert metric_total(text, "vllm:e2e_request_latency_seconds_count") == len(replay.usages)


def test_cpu_tier_hits_are_reported_per_request_and_in_metrics():
    # 20 device blocks: the second prompt evicts the first to the CPU tier; the third brings it back
    config = EngineConfig(
        runner="simulated",
        sim_time_scale=0.0,
        num_gpu_blocks=20,
        cpu_offload_blocks=64,
        device="cpu",
        max_model_len=300,
    )
    first = [1000 + i % 500 for i in range(200)]
    second = [1100 + i % 400 for i in range(200)]
    with (
        BackgroundServer(config) as server,
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        usages = [
            client.completions.create(model=MODEL, prompt=p, max_tokens=2).usage
            for p in (first, second, first)
        ]
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=HANG_S) as resp:
            text = resp.read().decode()
    details = [u.prompt_tokens_details for u in usages]
    assert details[2].cached_tokens == 192
    assert details[2].model_extra["cached_tokens_cpu"] > 0
    assert (
        details[2].model_extra["cached_tokens_cpu"] + details[2].model_extra["cached_tokens_device"]
        == 192
    )
    assert metric_total(text, "harness:cpu_prefix_cache_hits_total") == sum(
        d.model_extra["cached_tokens_cpu"] for d in details
    )
    assert metric_total(text, "vllm:prefix_cache_hits_total") == sum(
        d.cached_tokens for d in details
    )
