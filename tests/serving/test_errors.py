"""Malformed requests get the right status and an OpenAI-style error body, and the server keeps
serving; a client that goes away mid-request aborts it in the engine."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse

import pytest

from harness.engine.config import EngineConfig
from harness.prometheus import metric_total
from harness.serving.server import BackgroundServer
from tests.waits import HANG_S

MODEL = "agentic-harness-reference"
MAX_LEN = 1024


@pytest.fixture(scope="module")
def server():
    config = EngineConfig(num_gpu_blocks=256, device="cpu", max_model_len=MAX_LEN)
    with BackgroundServer(config) as running:
        yield running


def request(
    url: str, method: str, path: str, body: bytes | dict | None = None, timeout: float = 30
):
    """(status, parsed JSON body or text) of one plain HTTP request."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        raw = json.dumps(body).encode() if isinstance(body, dict) else body
        conn.request(method, path, body=raw, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read().decode()
        is_json = resp.getheader("Content-Type", "").startswith("application/json")
        return resp.status, json.loads(data) if is_json else data
    finally:
        conn.close()


def ok_completion(**fields) -> dict:
    return {"model": MODEL, "prompt": [1000, 1001, 1002], "max_tokens": 2, **fields}


def ok_chat(**fields) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "the"}],
        "max_tokens": 2,
        **fields,
    }


CASES = [
    # (name, method, path, body, status, param)
    ("invalid json", "POST", "/v1/completions", b"{not json", 400, None),
    ("json not an object", "POST", "/v1/completions", b"[1, 2]", 400, None),
    ("empty body", "POST", "/v1/chat/completions", b"", 400, None),
    ("missing prompt", "POST", "/v1/completions", {"model": MODEL, "max_tokens": 2}, 400, "prompt"),
    ("missing messages", "POST", "/v1/chat/completions", {"model": MODEL}, 400, "messages"),
    ("prompt wrong type", "POST", "/v1/completions", ok_completion(prompt=5), 400, "prompt"),
    (
        "prompt of floats",
        "POST",
        "/v1/completions",
        ok_completion(prompt=[1.5, 2.0]),
        400,
        "prompt",
    ),
    ("prompt of bools", "POST", "/v1/completions", ok_completion(prompt=[True]), 400, "prompt"),
    ("empty prompt", "POST", "/v1/completions", ok_completion(prompt=[]), 400, "prompt"),
    (
        "batch of two",
        "POST",
        "/v1/completions",
        ok_completion(prompt=[[1000], [1001]]),
        400,
        "prompt",
    ),
    ("id 32000", "POST", "/v1/completions", ok_completion(prompt=[1000, 32000]), 400, "prompt"),
    ("negative id", "POST", "/v1/completions", ok_completion(prompt=[-1]), 400, "prompt"),
    (
        "over-long prompt",
        "POST",
        "/v1/completions",
        ok_completion(prompt=[1000] * (MAX_LEN + 1)),
        400,
        "prompt",
    ),
    (
        "prompt + max_tokens too long",
        "POST",
        "/v1/completions",
        ok_completion(prompt=[1000] * (MAX_LEN - 10), max_tokens=11),
        400,
        "max_tokens",
    ),
    ("max_tokens 0", "POST", "/v1/completions", ok_completion(max_tokens=0), 400, "max_tokens"),
    (
        "max_tokens negative",
        "POST",
        "/v1/chat/completions",
        ok_chat(max_tokens=-3),
        400,
        "max_tokens",
    ),
    (
        "max_tokens a string",
        "POST",
        "/v1/completions",
        ok_completion(max_tokens="5"),
        400,
        "max_tokens",
    ),
    (
        "max_completion_tokens 0",
        "POST",
        "/v1/chat/completions",
        ok_chat(max_tokens=None, max_completion_tokens=0),
        400,
        "max_completion_tokens",
    ),
    ("min over max", "POST", "/v1/completions", ok_completion(min_tokens=5), 400, "min_tokens"),
    (
        "ignore_eos not bool",
        "POST",
        "/v1/completions",
        ok_completion(ignore_eos="yes"),
        400,
        "ignore_eos",
    ),
    (
        "temperature too high",
        "POST",
        "/v1/completions",
        ok_completion(temperature=3),
        400,
        "temperature",
    ),
    ("stream not bool", "POST", "/v1/completions", ok_completion(stream=1), 400, "stream"),
    (
        "stream_options without stream",
        "POST",
        "/v1/completions",
        ok_completion(stream_options={"include_usage": True}),
        400,
        "stream_options",
    ),
    ("n = 2", "POST", "/v1/chat/completions", ok_chat(n=2), 400, "n"),
    ("logprobs", "POST", "/v1/completions", ok_completion(logprobs=2), 400, "logprobs"),
    ("tools not an array", "POST", "/v1/chat/completions", ok_chat(tools="read"), 400, "tools"),
    (
        "json response_format",
        "POST",
        "/v1/chat/completions",
        ok_chat(response_format={"type": "json_object"}),
        400,
        "response_format",
    ),
    ("empty stop string", "POST", "/v1/completions", ok_completion(stop=["\n", ""]), 400, "stop"),
    ("stop not a string", "POST", "/v1/completions", ok_completion(stop=5), 400, "stop"),
    (
        "bad stop ids",
        "POST",
        "/v1/completions",
        ok_completion(stop_token_ids=[40000]),
        400,
        "stop_token_ids",
    ),
    (
        "bad role",
        "POST",
        "/v1/chat/completions",
        ok_chat(messages=[{"role": "robot", "content": "x"}]),
        400,
        "messages[0].role",
    ),
    (
        "image part",
        "POST",
        "/v1/chat/completions",
        ok_chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
        400,
        "messages[0].content[0]",
    ),
    ("model not a string", "POST", "/v1/completions", ok_completion(model=7), 400, "model"),
    ("unknown model", "POST", "/v1/completions", ok_completion(model="gpt-5"), 404, "model"),
    ("unknown model, chat", "POST", "/v1/chat/completions", ok_chat(model="llama"), 404, "model"),
    ("unknown route", "POST", "/v1/embeddings", ok_completion(), 404, None),
    ("unknown get", "GET", "/nope", None, 404, None),
    ("GET a POST route", "GET", "/v1/completions", None, 405, None),
    ("POST a GET route", "POST", "/v1/models", b"{}", 405, None),
]


@pytest.mark.parametrize(
    "name, method, path, body, status, param", CASES, ids=[c[0] for c in CASES]
)
def test_bad_request_gets_an_openai_error_and_the_server_keeps_serving(
    server, name, method, path, body, status, param
):
    got, payload = request(server.url, method, path, body)
    assert got == status, payload
    error = payload["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and error["type"] == "invalid_request_error"
    assert error["param"] == param
    if name.startswith("unknown model"):
        assert error["code"] == "model_not_found"
    follow_up, answer = request(server.url, "POST", "/v1/completions", ok_completion())
    assert follow_up == 200 and answer["usage"]["completion_tokens"] >= 1


def running_and_generated(url: str) -> tuple[float, float]:
    _, text = request(url, "GET", "/metrics")
    return metric_total(text, "vllm:num_requests_running"), metric_total(
        text, "vllm:generation_tokens_total"
    )


def wait_until_idle(url: str, timeout: float = HANG_S) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running, generated = running_and_generated(url)
        if running == 0:
            return generated
        time.sleep(0.05)
    raise AssertionError("the engine still runs the request its client abandoned")


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_disconnects_aborts_its_request(server, stream):
    before = wait_until_idle(server.url)
    _, text = request(server.url, "GET", "/metrics")
    aborted = metric_total(text, "vllm:request_success_total", finished_reason="abort")
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=HANG_S)
    body = ok_completion(max_tokens=MAX_LEN - 10, ignore_eos=True, stream=stream)
    conn.request(
        "POST",
        "/v1/completions",
        body=json.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    if stream:
        resp = conn.getresponse()
        assert resp.status == 200 and resp.readline().startswith(b"data: ")
    else:
        deadline = time.monotonic() + HANG_S
        while running_and_generated(server.url)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    generated = wait_until_idle(server.url) - before
    assert 0 < generated < MAX_LEN - 10
    _, text = request(server.url, "GET", "/metrics")
    assert metric_total(text, "vllm:request_success_total", finished_reason="abort") == aborted + 1
