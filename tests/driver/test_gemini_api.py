"""`api: gemini` against a real aiohttp server speaking Google's documented wire format
(tests/driver/gemini_server.py): bodies, the URL with the model and alt=sse, the key as
x-goog-api-key, running usage per chunk, cached tokens from cachedContentTokenCount, faults,
the model list, the implicit cache's rules; and `harness replay --api gemini` from the CLI."""

from __future__ import annotations

import orjson
import pytest

from harness.driver.apis.gemini.convert import SKIP_SIGNATURE, to_contents
from harness.driver.apis.gemini.decode import GeminiDecoder
from harness.driver.http import CacheRules
from harness.driver.target import Done, Failure, RequestSpec, Usage
from harness.errors import TargetError
from tests.driver.gemini_server import GeminiServer
from tests.driver.helpers import (
    load_manifest,
    load_records,
    replay,
    sess,
    started_servers,
    target,
    trace,
)
from tests.driver.sse_server import ServerConfig
from tests.driver.test_agent_apis import ListSink
from tests.driver.test_api_convert import CHAT, TOOLS
from tests.driver.test_endings import _harness, _trace

KEY = "AIza-gemini-secret-0123456789"


@pytest.fixture
async def gemini():
    config = ServerConfig(block_size=4, models=("gemini-2.5-flash",))
    async with started_servers(lambda **kw: GeminiServer(config, **kw)) as make:
        yield make


def spec(session="s1", max_tokens=6, messages=CHAT, tools=TOOLS) -> RequestSpec:
    return RequestSpec(
        request_id="r1",
        session_id=session,
        sticky_key=session,
        endpoint=0,
        max_tokens=max_tokens,
        prompt_tokens=100,
        messages=messages,
        tools=tools,
    )


async def _stream(server, session="s1", **kw) -> ListSink:
    tgt = target(server.url, api="gemini", model="gemini-2.5-flash", **kw)
    await tgt.start(check=False)
    try:
        sink = ListSink()
        await tgt.stream(spec(session), sink)
        return sink
    finally:
        await tgt.close()


def test_chat_becomes_contents_with_calls_responses_and_one_signature_a_turn():
    system, contents = to_contents(CHAT)
    assert system == {"parts": [{"text": "You are a coding agent."}]}
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user"]
    calls = contents[1]["parts"]
    assert calls[0] == {"text": "Reading both files."}
    assert calls[1] == {
        "functionCall": {"name": "read_file", "args": {"path": "a.py"}, "id": "c1"},
        "thoughtSignature": SKIP_SIGNATURE,  # the first call of the turn alone
    }
    assert calls[2] == {"functionCall": {"name": "ls", "args": {}, "id": "c2"}}
    results = contents[2]["parts"]  # both results and the next user text: one user content
    assert results[0]["functionResponse"] == {
        "name": "read_file",
        "response": {"output": "def f():\n    return 1"},
        "id": "c1",
    }
    assert results[1]["functionResponse"]["name"] == "ls" and results[2] == {
        "text": "Also check b.py"
    }
    assert contents[4]["parts"][0]["functionResponse"]["response"] == {"output": "import a"}


def test_the_body_carries_no_field_google_does_not_know():
    tgt = target(
        "http://127.0.0.1:1",
        api="gemini",
        model="gemini-2.5-flash",
        api_key=KEY,
        tool_choice="required",
        sampling={"temperature": 0.5, "top_p": 0.9, "top_k": 40, "seed": 7},
    )
    body = tgt.body(spec())
    assert list(body) == [
        "systemInstruction",
        "tools",
        "toolConfig",
        "contents",
        "generationConfig",
    ]
    declared = body["tools"][0]["functionDeclarations"]
    assert declared[0] == {
        "name": "read_file",
        "description": "Read a file",
        "parametersJsonSchema": TOOLS[0]["function"]["parameters"],
    }
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["generationConfig"] == {
        "maxOutputTokens": 6,
        "temperature": 0.5,
        "topP": 0.9,
        "topK": 40,
        "seed": 7,
    }
    assert tgt.base_headers["x-goog-api-key"] == KEY and "Authorization" not in tgt.base_headers
    described = tgt.describe()
    assert described["min_tokens"] is False and described["ignore_eos"] is False


def _chunk(parts, usage=None, finish=None) -> bytes:
    candidate: dict = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return orjson.dumps({"candidates": [candidate]} | ({"usageMetadata": usage} if usage else {}))


def test_running_counts_give_each_chunk_its_tokens_thoughts_included():
    dec = GeminiDecoder(keep_text=True)
    thought = [{"text": "**Planning**", "thought": True}]
    assert dec.read([_chunk(thought, {"promptTokenCount": 30, "thoughtsTokenCount": 12})], 1) == 12
    usage = {"promptTokenCount": 30, "candidatesTokenCount": 5, "thoughtsTokenCount": 12}
    assert dec.read([_chunk([{"text": "Hello"}], usage)], 2) == 5
    call = [{"functionCall": {"name": "ls", "args": {}}}]
    end = usage | {"candidatesTokenCount": 9, "cachedContentTokenCount": 16}
    assert dec.read([_chunk(call, end, "STOP")], 3) == 4
    assert dec.text() == "**Planning**Hello"
    assert dec.finish(4)[:1] == [Usage(30, 21, 16)] and isinstance(dec.finish(4)[-1], Done)
    bare = GeminiDecoder()  # no counts on the chunks: one token each, the usage says the rest
    assert bare.read([_chunk([{"text": "a"}]), _chunk([{"text": "b"}])], 1) == 2
    assert bare.read([_chunk([], {"promptTokenCount": 3}, "STOP")], 2) == 0
    assert bare.finish(3)[0] == Usage(3, 0, 0)  # zero counts are left out, as protobuf does


@pytest.mark.parametrize(
    ("fault", "error_class", "says"),
    [
        ("errorobj", "StreamError", "INTERNAL: injected stream error"),
        ("malformed", "MalformedEvent", ""),
        ("close", "ConnectionClosed", ""),
        ("nofinish", "IncompleteStream", "finishReason"),
        ("nousage", "MissingUsage", "usageMetadata"),
        ("blocked", "PromptBlocked", "SAFETY"),
        ("http429", "HTTP429", "injected http429"),
        ("http500", "HTTP500", "injected http500"),
    ],
)
async def test_failures_of_a_gemini_stream(gemini, fault, error_class, says):
    sink = await _stream(await gemini(), session=f"fault-{fault}-x")
    last = sink.events[-1]
    assert isinstance(last, Failure), sink.events
    assert last.error_class == error_class and says in last.message, last


async def test_a_tool_shaped_turn_and_a_field_google_would_refuse(gemini):
    server = await gemini(key=KEY)
    sink = await _stream(server, api_key=KEY)
    assert isinstance(sink.events[-1], Done) and sink.tokens == 6, sink.events
    entry = server.log[0]
    assert entry["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert entry["query"] == "alt=sse" and entry["key"] == KEY
    refused = await _stream(server, api_key="wrong")
    assert refused.events[-1].error_class == "HTTP400"  # type: ignore[union-attr]


async def test_the_model_list_holds_the_models_that_stream(gemini):
    server = await gemini()
    listed = target(server.url, api="gemini", model="gemini-2.5-flash", preflight=True)
    await listed.start()
    await listed.close()
    assert [e["model"] for e in server.log] == ["gemini-2.5-flash"]  # the probe, shaped so
    other = target(server.url, api="gemini", model="embed-only", preflight=True)
    with pytest.raises(TargetError, match="does not serve model 'embed-only'; it serves: gemini"):
        await other.start()
    await other.close()


def test_the_implicit_caches_rules():
    auto = CacheRules().resolved("gemini", ["https://generativelanguage.googleapis.com"])
    assert auto.kind == "gemini"
    assert CacheRules().resolved("gemini", ["http://127.0.0.1:1"]).kind == "none"
    assert auto.profile("gemini-2.5-flash") == {
        "kind": "gemini",
        "min_tokens": 2048,
        "step_tokens": 1,
        "ttl_s": None,  # Google publishes no lifetime for an implicit entry
        "prices": None,
    }
    assert auto.profile("gemini-3.5-flash")["min_tokens"] == 4096
    with pytest.raises(ValueError, match="cache_rules gemini needs api 'gemini', not 'chat'"):
        auto.check("chat")


@pytest.mark.slow
async def test_a_replay_records_the_servers_cached_tokens(gemini, tmp_path):
    server = await gemini(min_tokens=45)  # words: b's prompt (38) is under it, a's are not
    tr = trace(sess("a", [(40, 4, 0), (8, 3, 0), (8, 3, 0)], system=16), sess("b", [(4, 3, 0)]))
    rules = CacheRules(kind="gemini", min_tokens=45)
    kw = {"model": "gemini-2.5-flash", "preflight": True, "api_key": KEY, "cache_rules": rules}
    _, recs, manifest = await replay(tr, server.url, tmp_path, api="gemini", target_kw=kw)
    assert [r["status"] for r in recs] == ["ok"] * 4
    by_id = {r["request_id"]: r for r in recs}
    served = {e["request_id"]: e for e in server.log}
    for rid, rec in by_id.items():
        assert rec["cached_tokens"] == served[rid]["cached_tokens"]
        assert rec["prompt_tokens"] == served[rid]["prompt_tokens"]
        assert rec["completion_tokens"] == sum(rec["chunk_tokens"])
    assert by_id["a:1"]["cached_tokens"] > 0 and by_id["a:2"]["cached_tokens"] > 0
    assert by_id["b:0"]["cached_tokens"] == 0  # under the minimum: nothing kept
    assert manifest["target"]["api"] == "gemini"
    assert manifest["target"]["token_placement"] == "usage per event"
    assert manifest["target"]["cache_rules"]["kind"] == "gemini"
    for f in tmp_path.rglob("*"):
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f


@pytest.mark.slow
async def test_harness_replay_api_gemini_from_the_command_line(gemini, tmp_path):
    server = await gemini(key=KEY)
    path = _trace(tmp_path, [sess("a", [(24, 3, 0), (8, 3, 0)], system=16)])
    run = tmp_path / "run"
    code, _, err = await _harness(
        "replay", path, "--endpoint", server.url, "--api", "gemini",
        "--model", "gemini-2.5-flash", "--api-key-env", "GEMINI_KEY", "-o", run, "--quiet",
        env={"GEMINI_KEY": KEY},
    )  # fmt: skip
    assert code == 0, err
    recs = load_records(run)
    assert [r["status"] for r in recs] == ["ok", "ok"]
    assert recs[1]["cached_tokens"] == server.log[-1]["cached_tokens"] > 0
    assert load_manifest(run)["target"]["api"] == "gemini"
