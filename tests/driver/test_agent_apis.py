"""`api: messages` and `api: responses` against a real aiohttp server speaking both: streams,
usage forms, cached tokens, errors mid-stream, bodies, headers, the key kept out of the run."""

import pytest

from harness.driver.target import Done, Failure, RequestSpec, Usage
from tests.driver.agent_server import AgentServer
from tests.driver.helpers import by_id, replay, sess, started_servers, target, trace
from tests.driver.sse_server import ServerConfig
from tests.driver.test_api_convert import CHAT, TOOLS

KEY = "sk-agent-secret-0123456789"


@pytest.fixture
async def agents():
    async with started_servers(
        lambda **kw: AgentServer(ServerConfig(token_delay=0.0005), **kw)
    ) as make:
        yield make


class ListSink:
    def __init__(self) -> None:
        self.tokens, self.events = 0, []

    def chunk(self, t, tokens, text):
        self.tokens += tokens

    def event(self, ev):
        self.events.append(ev)


async def _stream(server, api, session="s1", **kw):
    tgt = target(server.url, api=api, **kw)
    await tgt.start(check=False)
    try:
        sink = ListSink()
        spec = RequestSpec(
            request_id="r1",
            session_id=session,
            sticky_key=session,
            endpoint=0,
            max_tokens=6,
            prompt_tokens=100,
            messages=CHAT,
            tools=TOOLS,
        )
        await tgt.stream(spec, sink)
        return sink
    finally:
        await tgt.close()


@pytest.mark.parametrize("api", ["messages", "responses"])
async def test_a_tool_shaped_turn_streams_every_output_token(agents, api):
    server = await agents()
    sink = await _stream(server, api)
    assert isinstance(sink.events[-1], Done), sink.events
    assert sink.tokens == 6  # text deltas, then tool-argument deltas
    body = server.log[0]["body"]
    if api == "messages":
        kinds = {b["type"] for m in body["messages"] for b in m["content"]}
        assert body["system"] and body["tools"] and {"tool_use", "tool_result"} <= kinds
    else:
        kinds = {i["type"] for i in body["input"]}
        assert body["instructions"] and body["tools"]
        assert {"function_call", "function_call_output", "message"} <= kinds
        assert body["max_output_tokens"] == 6 and body["store"] is False


@pytest.mark.parametrize("form", ["anthropic", "vllm"])
@pytest.mark.slow
async def test_messages_records_the_cache_read_and_the_whole_prompt(agents, tmp_path, form):
    server = await agents(usage_form=form)
    tr = trace(sess("a", [(64, 4, 0), (40, 4, 0), (40, 4, 0)], system=64))
    result, recs, manifest = await replay(tr, server.url, tmp_path, api="messages")
    assert [r["status"] for r in recs] == ["ok"] * 3
    assert [r["path"] for r in server.log] == ["/v1/messages"] * 3
    for rec, seen in zip(recs, server.log, strict=True):
        assert rec["cached_tokens"] == seen["cached_tokens"]
        assert rec["prompt_tokens"] == seen["prompt_tokens"]  # input + cache reads + creations
        assert rec["completion_tokens"] == sum(rec["chunk_tokens"]) == 4
    assert recs[-1]["cached_tokens"] > 0
    assert manifest["replay"]["api"] == "messages"


@pytest.mark.slow
async def test_responses_records_input_tokens_details_cached_tokens(agents, tmp_path):
    server = await agents()
    tr = trace(sess("a", [(64, 4, 0), (40, 4, 0)], system=64))
    _, recs, _ = await replay(tr, server.url, tmp_path, api="responses")
    assert [r["status"] for r in recs] == ["ok"] * 2
    assert [r["cached_tokens"] for r in recs] == [s["cached_tokens"] for s in server.log]
    assert recs[1]["cached_tokens"] > 0
    assert [r["prompt_tokens"] for r in recs] == [s["prompt_tokens"] for s in server.log]


@pytest.mark.slow
async def test_previous_response_id_sends_only_the_new_items(agents, tmp_path):
    server = await agents()
    tr = trace(sess("a", [(64, 4, 0), (40, 4, 0), (40, 4, 0)], system=64))
    _, recs, _ = await replay(
        tr, server.url, tmp_path, api="responses", target_kw={"previous_response_id": True}
    )
    assert [r["status"] for r in recs] == ["ok"] * 3
    bodies = [e["body"] for e in server.log]
    assert "previous_response_id" not in bodies[0] and bodies[0]["store"] is True
    for before, body in zip(bodies, bodies[1:], strict=False):
        assert body["previous_response_id"].startswith("resp_")
        assert body["instructions"] == before["instructions"]  # sent again every turn
        assert [i["role"] for i in body["input"]] == ["user"]  # no history, no recorded reply
    assert bodies[1]["previous_response_id"] != bodies[2]["previous_response_id"]
    assert recs[2]["cached_tokens"] > 0  # the server's history is its prefix


@pytest.mark.parametrize(
    ("api", "fault", "status", "error_class", "says"),
    [
        ("messages", "errorevent", "error", "StreamError", "overloaded_error: injected overload"),
        ("messages", "malformed", "error", "MalformedEvent", ""),
        ("messages", "nostop", "error", "IncompleteStream", "message_stop"),
        ("messages", "nousage", "error", "MissingUsage", "usage"),
        ("messages", "http429", "error", "HTTP429", "injected 429"),
        ("messages", "close", "error", "ConnectionClosed", ""),
        ("responses", "errorevent", "error", "StreamError", "server_error: injected failure"),
        ("responses", "errorplain", "error", "StreamError", "server_error: injected error"),
        ("responses", "nostop", "error", "IncompleteStream", "response.completed"),
        ("responses", "nousage", "error", "MissingUsage", "usage"),
        ("responses", "http500", "error", "HTTP500", "injected 500"),
        ("responses", "incomplete", "ok", None, ""),
    ],
)
async def test_failures_mid_stream(agents, api, fault, status, error_class, says):
    server = await agents()
    sink = await _stream(server, api, session=f"fault-{fault}-x")
    last = sink.events[-1]
    if status == "ok":
        assert isinstance(last, Done) and any(isinstance(e, Usage) for e in sink.events)
        return
    assert isinstance(last, Failure), sink.events
    assert last.error_class == error_class and says in last.message, last


@pytest.mark.slow
async def test_the_key_goes_as_x_api_key_and_never_into_the_run(agents, tmp_path, monkeypatch):
    server = await agents()
    tr = trace(sess("a", [(16, 3, 0)]), sess("fault-errorevent-b", [(16, 3, 0)]))
    _, recs, manifest = await replay(
        tr, server.url, tmp_path, api="messages", target_kw={"api_key": KEY}
    )
    headers = [e["headers"] for e in server.log]
    assert all(h["x-api-key"] == KEY and h["anthropic-version"] == "2023-06-01" for h in headers)
    assert all(h["Authorization"] == f"Bearer {KEY}" for h in headers)
    assert sorted(r["status"] for r in recs) == ["error", "ok"]
    for f in tmp_path.rglob("*"):
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f


@pytest.mark.slow
async def test_session_header_families_with_a_subagents_parent_and_root(agents, tmp_path):
    server = await agents()
    tr = trace(
        sess("main", [(16, 2, 0, ["sub"]), (8, 2, 0)]),
        sess("sub", [(8, 2, 0)], parent="main", fork_turn=0, mode="spawn"),
    )
    families = ("x-session-id", "correlation", "dynamo", "smg")
    _, recs, _ = await replay(
        tr, server.url, tmp_path, api="messages", target_kw={"session_headers": families}
    )
    assert [r["status"] for r in recs] == ["ok"] * 3
    seen = {e["request_id"]: e["headers"] for e in server.log}
    main, sub = seen["main:0"], seen["sub:0"]
    assert main == {
        "anthropic-version": "2023-06-01",
        "X-Session-ID": "main",
        "X-Correlation-ID": "main",
        "X-Dynamo-Session-ID": "main",
        "X-SMG-Routing-Key": "main",
    }
    assert sub == {
        "anthropic-version": "2023-06-01",
        "X-Session-ID": "main",  # follows its parent (the sticky key)
        "X-Parent-Session-ID": "main",
        "X-Root-Session-ID": "main",
        "X-Correlation-ID": "main",
        "X-Dynamo-Session-ID": "sub",  # Dynamo: its own chain, and its parent's
        "X-Dynamo-Parent-Session-ID": "main",
        "X-SMG-Routing-Key": "main",
    }
    assert by_id(recs)["sub:0"]["parent_session_id"] == "main"


@pytest.mark.slow
async def test_the_default_is_x_session_id_alone(agents, tmp_path):
    server = await agents()
    await replay(trace(sess("a", [(16, 2, 0)])), server.url, tmp_path, api="responses")
    assert server.log[0]["headers"] == {"X-Session-ID": "a"}


async def test_the_preflight_finds_a_server_that_keeps_no_responses(agents):
    from harness.errors import TargetError

    for store in (True, False):
        server = await agents(store=store)
        tgt = target(server.url, api="responses", previous_response_id=True, preflight=True)
        try:
            if store:
                await tgt.start()
            else:
                with pytest.raises(TargetError, match="keeps no responses"):
                    await tgt.start()
        finally:
            await tgt.close()
