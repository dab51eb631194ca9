"""Hosted cache rules end to end: a trace replayed against the fake Anthropic server
(hosted_server.py), which applies a minimum cacheable length and a TTL; the analysis, given the
same rules through the manifest, names the misses "ineligible" and "expired".

The fake server and the rules profile take the TTL from one setting (`CacheRules.ttl_s`): the
fast test uses a 2 s TTL and a 4 s think gap; the `slow` one the real 5 minutes and 6 minutes.
"""

from __future__ import annotations

import pytest

from harness.analysis.loader import load_run
from harness.analysis.summary import analyze, analyze_run
from harness.driver.http import CacheRules, Prices
from harness.report.text import summary_table
from tests.driver.helpers import replay, sess, trace
from tests.driver.hosted_server import HostedServer
from tests.trace.chat_fixtures import tokenizer_dir

MINIMUM = 60  # tokens: the main session's prompts are above it, a subagent's first is below


def agent_trace(gap_s: float):
    """A main session (system prompt 40 words) that spawns two subagents with short first
    prompts, then thinks `gap_s` before its next turn."""
    subagents = [
        sess(s, [(10, 5, 0.0), (10, 5, 0.0)], parent="m", fork_turn=1, mode="spawn", system=40)
        for s in ("m.s1", "m.s2")
    ]
    main = sess("m", [(30, 10, 0.0), (20, 5, 0.0, ["m.s1", "m.s2"]), (20, 5, gap_s)], system=40)
    return trace(main, *subagents)


async def replay_hosted(tmp_path, ttl_s: float, gap_s: float, prices: Prices | None = None):
    rules = CacheRules(kind="anthropic", min_tokens=MINIMUM, ttl_s=ttl_s)
    server = HostedServer(min_tokens=MINIMUM, ttl_s=ttl_s)  # one TTL for the server and rules
    await server.start()
    try:
        await replay(
            agent_trace(gap_s),
            server.url,
            tmp_path / "run",
            api="messages",
            block_size=1,
            tokenizer=str(tokenizer_dir(tmp_path / "tok")),
            target_kw={"cache_rules": rules, "prices": prices},
        )
    finally:
        await server.stop()
    result = analyze(load_run(tmp_path / "run"))
    frame = result.misses.join(result.run.ok[["session_id", "turn"]])
    return server, result.summary["cache"], frame.set_index(["session_id", "turn"])


def check_named(cache: dict, frame) -> None:
    main = frame.loc["m"]
    assert main.loc[1, "cached"] > 0 and main.loc[1, "miss_expired"] == 0  # within the TTL
    after_gap = main.loc[2]
    assert after_gap["cached"] == 0 and after_gap["ideal"] > MINIMUM
    assert after_gap["miss_expired"] == after_gap["ideal"]  # all of it, none "evicted"
    assert after_gap["miss_evicted"] == 0 and after_gap["miss_class"] == "expired"
    for sid in ("m.s1", "m.s2"):
        sub = frame.loc[sid]
        assert (sub["ideal"] > 0).all() and (sub["ideal"] < MINIMUM).all()
        assert (sub["miss_ineligible"] == sub["ideal"]).all()
        assert (sub["miss_class"] == "ineligible").all()
    hosted = cache["hosted"]
    assert hosted["ineligible_tokens"] == frame["miss_ineligible"].sum() > 0
    assert hosted["expired_tokens"] == after_gap["miss_expired"]
    assert hosted["requests_below_minimum"] == 4  # each subagent's two calls
    # what is left "evicted" is the generation prompt's tail past the last breakpoint (2 tokens)
    assert cache["miss_tokens"]["evicted"] <= 2


@pytest.mark.slow
async def test_short_first_prompts_are_ineligible_and_a_long_think_expired(tmp_path):
    server, cache, frame = await replay_hosted(tmp_path, ttl_s=2.0, gap_s=4.0)
    check_named(cache, frame)
    first = server.log[0]["body"]  # Claude Code's breakpoints: the system prompt, the newest turn
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert cache["hosted"]["rules"]["ttl_s"] == 2.0


@pytest.mark.slow
async def test_without_the_gap_nothing_expires(tmp_path):
    _, cache, frame = await replay_hosted(tmp_path, ttl_s=30.0, gap_s=0.5)
    after = frame.loc["m"].loc[2]
    assert after["cached"] > 0 and after["miss_expired"] == 0
    assert after["ideal"] - after["cached"] == 2  # the generation prompt, past the breakpoint
    assert cache["hosted"]["expired_tokens"] == 0


@pytest.mark.slow
async def test_usage_is_recorded_raw_and_priced(tmp_path):
    prices = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write_5m=3.75)
    server, cache, _ = await replay_hosted(tmp_path, ttl_s=30.0, gap_s=0.0, prices=prices)
    summary = {**analyze_run(tmp_path / "run")}
    use = cache["hosted"]["usage"]
    logged = [e["usage"] for e in server.log]
    assert use["cache_read_tokens"] == sum(u["cache_read_input_tokens"] for u in logged) > 0
    assert use["cache_write_tokens"] == sum(u["cache_creation_input_tokens"] for u in logged) > 0
    assert use["cache_write_5m_tokens"] == use["cache_write_tokens"]
    money = cache["hosted"]["cost"]
    fresh = use["prompt_tokens"] - use["cache_read_tokens"] - use["cache_write_tokens"]
    expect = (
        fresh * 3.0
        + use["cache_read_tokens"] * 0.3
        + use["cache_write_tokens"] * 3.75
        + use["output_tokens"] * 15.0
    ) / 1e6
    assert money["unit"] == "money" and money["with_cache"] == pytest.approx(expect)
    assert money["saved"] == pytest.approx(money["without_cache"] - expect)
    text = summary_table(summary)
    assert "hosted cache rules       anthropic (min 60 tokens, TTL 30 s)" in text
    assert f"read {use['cache_read_tokens']:.0f}, wrote {use['cache_write_tokens']:.0f}" in text


@pytest.mark.slow
@pytest.mark.timeout(480)  # CI runs slow tests: this one waits its 6 minutes (~6.1 min wall)
async def test_the_real_five_minute_ttl_and_a_six_minute_think(tmp_path):
    """About 6 minutes of wall time: the Done-when's own numbers."""
    _, cache, frame = await replay_hosted(tmp_path, ttl_s=300.0, gap_s=360.0)
    check_named(cache, frame)
