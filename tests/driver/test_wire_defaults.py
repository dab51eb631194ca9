"""What a server sees by default, against real aiohttp servers that log every body: the harness's
sampling in each API's own fields, usage asked for on every event where the server gives it,
a multi-token event's tokens placed by its text, replies shorter than asked counted."""

from __future__ import annotations

import pytest

from harness.analysis.summary import analyze_run
from harness.driver.http.placing import place
from harness.driver.http.sampling import Sampling
from harness.driver.target import RequestSpec
from harness.report.text import summary_table
from tests.driver.agent_server import AgentServer
from tests.driver.helpers import replay, sess, started_servers, target, trace
from tests.driver.sse_server import ServerConfig, SSETestServer
from tests.driver.test_api_convert import CHAT, TOOLS
from tests.trace.chat_fixtures import tokenizer_dir

TRACE = trace(sess("a", [(20, 12, 0), (10, 12, 0)]), sess("b", [(15, 9, 0)]))
SET = Sampling(temperature=0.7, top_p=0.9, top_k=20, seed=3)


@pytest.fixture
async def servers():
    def build(kind=SSETestServer, **config) -> SSETestServer:
        return kind(ServerConfig(**{"token_delay": 0.003, **config}))  # an event per read

    async with started_servers(build) as make:
        yield make


class _Sink:
    def __init__(self) -> None:
        self.chunks: list[int] = []
        self.events: list = []

    def chunk(self, t, tokens, text):
        self.chunks.append(tokens)

    def event(self, ev):
        self.events.append(ev)


async def _one(server, api: str, **kw) -> tuple[dict, _Sink]:
    """One request (chat messages with tools) of `api`; the body the server got, and the sink."""
    tgt = target(server.url, api=api, **kw)
    await tgt.start()
    try:
        sink = _Sink()
        await tgt.stream(
            RequestSpec(
                request_id="r1",
                session_id="s",
                sticky_key="s",
                endpoint=0,
                max_tokens=8,
                prompt_tokens=40,
                messages=CHAT,
                tools=TOOLS,
                prompt="a b",
            ),
            sink,
        )
    finally:
        await tgt.close()
    return server.log[-1]["body"], sink


@pytest.mark.parametrize("api", ["chat", "completions", "messages", "responses"])
async def test_every_api_asks_for_greedy_sampling_by_default(servers, api):
    server = await servers(AgentServer)
    body, _ = await _one(server, api)
    assert body["temperature"] == 0
    assert not {"top_p", "top_k", "seed"} & body.keys()


@pytest.mark.parametrize("api", ["chat", "completions", "messages", "responses"])
async def test_sampling_goes_in_each_apis_own_fields(servers, api):
    server = await servers(AgentServer)
    body, _ = await _one(server, api, sampling=SET)
    want = {"temperature": 0.7, "top_p": 0.9, "top_k": 20, "seed": 3}
    if api == "messages":  # Anthropic's API has no seed
        del want["seed"]
    assert {k: body.get(k) for k in ("temperature", "top_p", "top_k", "seed") if k in body} == want


@pytest.mark.slow
async def test_the_manifest_and_the_first_screen_name_the_sampling(servers, tmp_path):
    server = await servers()
    _, _, manifest = await replay(
        TRACE, server.url, tmp_path / "run", api="chat", target_kw={"sampling": SET}
    )
    recorded = manifest["target"]["sampling"]
    assert recorded["temperature"] == 0.7 and recorded["sent"]["seed"] == 3
    summary = analyze_run(tmp_path / "run")
    assert summary["tested"]["sampling"] == recorded
    assert "sampling:    temperature 0.7, top_p 0.9, top_k 20, seed 3" in summary_table(summary)


@pytest.mark.slow
async def test_greedy_is_said_so(servers, tmp_path):
    server = await servers()
    await replay(TRACE, server.url, tmp_path / "run", api="completions")
    assert "sampling:    greedy, temperature 0" in summary_table(analyze_run(tmp_path / "run"))


@pytest.mark.slow
async def test_a_vllm_server_is_asked_for_usage_on_every_event(servers, tmp_path):
    server = await servers(owned_by="vllm", tokens_per_event=4)
    _, recs, manifest = await replay(TRACE, server.url, tmp_path / "run", api="chat")
    bodies = [e["body"] for e in server.log]
    assert all(b["stream_options"]["continuous_usage_stats"] is True for b in bodies)
    assert manifest["target"]["token_placement"] == "usage per event"
    a0 = next(r for r in recs if r["request_id"] == "a:0")
    assert a0["chunk_tokens"] == [4, 4, 4] and a0["completion_tokens"] == 12
    assert analyze_run(tmp_path / "run")["streamed"]["requests_short"] == 0


@pytest.mark.slow
async def test_a_server_not_known_to_give_it_is_not_asked(servers, tmp_path):
    server = await servers(tokens_per_event=4)  # /v1/models names no owner
    await replay(TRACE, server.url, tmp_path / "run", api="chat")
    assert all("continuous_usage_stats" not in e["body"]["stream_options"] for e in server.log)


@pytest.mark.slow
async def test_without_per_event_usage_the_tokenizer_places_each_events_tokens(servers, tmp_path):
    server = await servers(tokens_per_event=4)
    tok = tokenizer_dir(tmp_path / "tok")  # one token per word: " x0 x1 x2 x3" is 4
    _, recs, manifest = await replay(
        TRACE, server.url, tmp_path / "run", api="chat", target_kw={"tokenizer": str(tok)}
    )
    assert manifest["target"]["token_placement"].startswith("by text")
    for r in recs:
        assert sum(r["chunk_tokens"]) == r["completion_tokens"], r
    b0 = next(r for r in recs if r["request_id"] == "b:0")
    assert b0["chunk_tokens"] == [4, 4, 1]
    assert analyze_run(tmp_path / "run")["streamed"]["requests_short"] == 0


@pytest.mark.slow
async def test_without_either_the_warning_says_what_happened(servers, tmp_path):
    server = await servers(tokens_per_event=4)
    _, recs, _ = await replay(TRACE, server.url, tmp_path / "run", api="chat")
    assert all(set(r["chunk_tokens"]) == {1} for r in recs)  # one token counted per event
    summary = analyze_run(tmp_path / "run")
    assert summary["streamed"]["placement"].startswith("one token per event")
    warning = next(w for w in summary["warnings"] if "fewer tokens than" in w)
    assert "carried several" in warning and "came in no event that carried output" not in warning


def test_placing_keeps_within_the_usage_and_splits_by_what_each_text_holds():
    words = lambda text: len(text.split())  # noqa: E731
    assert place([1, 1, 1], ["a b c d", "x", ""], 7, words) == [4, 1, 1]  # texts hold less
    assert place([1, 1, 1], ["a b c d", "x y z", "q"], 5, words) == [2, 2, 1]  # largest rest
    assert place([2, 1], ["a b", "c"], 3, words) == [2, 1]  # nothing to place


@pytest.mark.slow
async def test_replies_as_long_as_asked_are_not_short(servers, tmp_path):
    server = await servers(AgentServer)
    await replay(TRACE, server.url, tmp_path / "run", api="messages")
    summary = analyze_run(tmp_path / "run")
    assert summary["short_replies"]["short"] == 0
    assert not any("short replies" in w for w in summary["warnings"])


@pytest.mark.parametrize("api", ["chat", "messages"])
@pytest.mark.slow
async def test_short_replies_are_counted_and_warned(servers, tmp_path, api):
    server = await servers(AgentServer, max_output=5)  # stops at 5 whatever was asked
    tr = trace(sess("a", [(20, 12, 0), (10, 3, 0)]), sess("b", [(15, 9, 0)]))
    await replay(tr, server.url, tmp_path / "run", api=api)
    summary = analyze_run(tmp_path / "run")
    short = summary["short_replies"]
    assert (short["api"], short["requests"], short["short"]) == (api, 3, 2)
    assert short["tokens_missing"] == (12 - 5) + (9 - 5) and short["worst"]["got"] == 5
    warning = next(w for w in summary["warnings"] if w.startswith("short replies"))
    assert "TPOT" in warning and "live-history" in warning
    assert f"short replies: 2 of 3 ok {api} replies" in summary_table(summary)


@pytest.mark.slow
async def test_messages_from_the_quickstarts_profile_carry_a_system(servers, tmp_path):
    from harness.app.build import build_trace
    from harness.app.scenario import load_scenario
    from tests.trace.tiny import ROOT, no_think

    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml", ["workload.sessions=1"])
    tr = no_think(build_trace(scenario))
    server = await servers(AgentServer)
    _, recs, _ = await replay(tr, server.url, tmp_path / "run", api="messages", max_requests=6)
    assert [r["status"] for r in recs] == ["ok"] * 6
    for entry in server.log:
        body = entry["body"]
        assert body["system"] and body["system"][0]["text"].strip(), body.get("system")
        assert body["tools"] and body["temperature"] == 0
    assert any(
        b["type"] == "tool_use"
        for e in server.log
        for m in e["body"]["messages"]
        for b in m["content"]
    )


@pytest.mark.parametrize("content", ["words", "code"])
@pytest.mark.slow
async def test_a_words_run_under_speculation_says_so_on_its_first_screen(
    servers, tmp_path, content
):
    from tests.trace.tiny import no_think, small_generated

    # the per-request form (no /metrics scrape here): the server reports speculative decoding
    server = await servers(spec_tokens=4, spec_accepted=3, spec_per_request=True)
    tr = no_think(small_generated(sessions=1, seed=5, content=content))
    await replay(tr, server.url, tmp_path / "run", api="chat", max_requests=3)
    summary = analyze_run(tmp_path / "run")
    assert summary["tested"]["content"] == {"kind": content, "turn_form": "plain"}
    first = summary_table(summary).splitlines()[:12]
    line = next(x for x in first if x.startswith("content:"))
    assert ("WORDS UNDER SPECULATIVE DECODING" in line) == (content == "words"), line
