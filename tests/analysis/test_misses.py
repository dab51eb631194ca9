"""Every missed prompt token named by evidence: cold, server rules, in flight, misrouted, evicted,
unexplained (hand-computed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from harness.report.text import summary_table
from harness.schema import RECORD_SCHEMA_VERSION
from harness.trace.native import write_trace
from tests.driver.helpers import sess, trace

# Block 16; every session starts with the same 32-token system prompt.
# a:0    prompt 32+10 = 42, output 30, forks f1 and f2 from its context (42 + 30 output).
# f1:0   prompt 72+20 = 92, sent at 1.0 when only a:0 had been sent: shares 42 -> ideal 32.
# f2:0   prompt 92, sent at 1.1 while f1 is still prefilling (first token 1.5): shares 72 with f1
#        -> ideal 64, but with finished requests only 42 -> 32.
# b:0    prompt 32+8 = 40, everything earlier finished: shares 32 -> ideal 32.
# c:0    prompt 32+4 = 36, shares 32; its server reports no cached_tokens.
# e:0    prompt 32+30 = 62, shares 32 -> ideal 32; its server hits 48 (warm from before the run).
TRACE = trace(
    sess("a", [(10, 30, 0, ["f1", "f2"])]),
    sess("f1", [(20, 2, 0)], parent="a", fork_turn=0, mode="fork"),
    sess("f2", [(20, 2, 0)], parent="a", fork_turn=0, mode="fork"),
    sess("b", [(8, 2, 0)]),
    sess("c", [(4, 2, 0)]),
    sess("e", [(30, 2, 0)]),
)
# (request, t_sent, t_first_token, prompt, cached)
SENT = [
    ("a:0", 0.0, 0.1, 42, 0),
    ("f1:0", 1.0, 1.5, 92, 32),
    ("f2:0", 1.1, 1.6, 92, 32),
    ("b:0", 2.0, 2.1, 40, 0),
    ("c:0", 3.0, 3.1, 36, None),
    ("e:0", 4.0, 4.1, 62, 48),
]


def write_run(folder: Path) -> Path:
    folder.mkdir()
    manifest = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "run_id": "misses",
        "harness_version": "0",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": None,
        "status": "complete",
        "block_size": 16,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    lines = []
    for rid, t, first, prompt, cached in reversed(SENT):  # file order is not send order
        sid, k = rid.split(":")
        lines.append(
            {
                "request_id": rid,
                "session_id": sid,
                "turn": int(k),
                "status": "ok",
                "phase": "measure",
                "endpoint": "e1",
                "t_sent": t,
                "t_first_token": first,
                "t_last_token": first,
                "t_done": first + 0.05,
                "prompt_tokens_expected": prompt,
                "prompt_tokens": prompt,
                "completion_tokens": 1,
                "cached_tokens": cached,
            }
        )
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    write_trace(TRACE, folder / "trace.jsonl")
    return folder


@pytest.fixture
def analysis(tmp_path):
    return analyze(load_run(write_run(tmp_path / "r")))


@pytest.mark.slow
def test_each_request_s_misses(analysis):
    m = analysis.misses.set_index("request_id")
    cols = [
        "miss_cold",
        "miss_granularity",
        "miss_in_flight",
        "miss_evicted",
        "miss_unreported",
        "beyond_ideal",
    ]
    got = {rid: [int(v) for v in m.loc[rid, cols]] for rid in m.index}
    assert got == {
        "a:0": [42, 0, 0, 0, 0, 0],  # nothing earlier
        "f1:0": [50, 10, 0, 0, 0, 0],  # 92-42 cold; 42 shared - 32 in whole blocks
        "f2:0": [20, 8, 32, 0, 0, 0],  # 92-72 cold; 72-64 partial block; 64-32 was f1's, in flight
        "b:0": [8, 0, 0, 32, 0, 0],  # the finished system prompt, missed: evicted (or misrouted)
        "c:0": [4, 0, 0, 0, 32, 0],  # no report: its ideal hit's fate is unknown
        "e:0": [14, 0, 0, 0, 0, 16],  # a 48-token hit over a 32 ideal: 16 of the cold 30 were warm
    }
    assert dict(m["miss_class"]) == {
        "a:0": "cold",
        "f1:0": "cold",
        "f2:0": "in_flight",
        "b:0": "evicted",
        "c:0": "unreported",
        "e:0": "cold",
    }
    reported = m[m["reported"]]  # the categories add up to what the server missed
    missed = reported[cols[:4]].sum(axis=1)
    assert (missed == reported["prompt"] - reported["cached"]).all()


def test_totals_in_summary_and_table(analysis):
    c = analysis.summary["cache"]
    assert c["miss_tokens"] == {
        "cold": 138.0,
        "granularity": 18.0,
        "prompt_cap": 0.0,
        "in_flight": 32.0,
        "misrouted": 0.0,
        "last_block": 0.0,
        "no_hits": 0.0,
        "ineligible": 0.0,  # no hosted cache rules in this run
        "expired": 0.0,
        "evicted": 32.0,
        "unexplained": 0.0,
        "unreported": 32.0,
    }
    assert c["beyond_ideal_tokens"] == 16.0
    assert c["requests_by_miss_class"] == {"cold": 3, "evicted": 1, "in_flight": 1, "unreported": 1}
    assert c["ideal"] == {"block_size": 16, "computed_from": "trace", "miss_attribution": "exact"}
    assert c["granularity"]["source"] == "manifest"  # 3 non-zero cached_tokens: too few to detect
    text = summary_table(analysis.summary)
    assert "252 of 364 prompt tokens (69.2% of prompt): cold 138 (37.9% of prompt)" in text
    assert "server rule: granularity 18 (4.9% of prompt)" in text and "in flight 32" in text
    assert "evicted 32 (8.8% of prompt)" in text and "unreported 32" in text
    assert c["missed_tokens"] == 252.0
    assert c["miss_share_of_prompt_tokens"]["evicted"] == pytest.approx(32 / 364)
    assert c["miss_share_of_missed_tokens"]["evicted"] == pytest.approx(32 / 252)
    assert "16 tokens from manifest" in text


# ---- against a real loopback server whose cache follows a known rule ----------------------------

# Block 32; a 32-token system prompt shared by every session. Turns whose prompt (system + inputs
# + earlier outputs) is a whole number of blocks: 64, 128, 192, ...; the rest are not (+8).
WHOLE = [(32, 32, 0.0)] * 5
PARTIAL = [(40, 24, 0.0)] * 4


def rule_trace():
    return trace(
        *(sess(f"w{i}", WHOLE) for i in range(4)),
        *(sess(f"p{i}", PARTIAL) for i in range(2)),
    )


async def replay_into(folder: Path, tr, configs, **kw) -> dict:
    from harness.analysis.summary import analyze_run
    from tests.driver.helpers import replay
    from tests.driver.sse_server import ServerConfig, SSETestServer

    servers = [SSETestServer(ServerConfig(keep_body=False, **c)) for c in configs]
    for srv in servers:
        await srv.start()
    try:
        kw = {"concurrency": 1, "api": "completions", "salt": None, **kw}  # no salt tokens
        await replay(tr, [srv.url for srv in servers], folder, **kw)
    finally:
        for srv in servers:
            await srv.stop()
    return analyze_run(folder)


def server_missed(folder: Path) -> float:
    """What the server missed of the ideal hit, request by request (the ideal is the analyzer's)."""
    from harness.analysis.ideal.walk import with_ideal

    records, _ = with_ideal(load_run(folder))
    return float((records["cached_tokens_ideal"] - records["cached_tokens"]).clip(lower=0).sum())


@pytest.mark.slow
async def test_a_server_that_never_keeps_a_whole_block_prompt_s_last_block(tmp_path):
    # An infinite cache, one endpoint, one request at a time: nothing is evicted, nothing in
    # flight; every ideal token the server misses is one the rule skipped.
    summary = await replay_into(
        tmp_path / "skip", rule_trace(), [dict(block_size=32, skip_last_block=True)]
    )
    c = summary["cache"]
    skipped = server_missed(tmp_path / "skip")
    assert skipped >= 3 * 32  # the rule had cases to be seen by
    miss = c["miss_tokens"]
    assert miss["evicted"] <= skipped / 4 and miss["evicted"] < 0.005 * c["prompt_tokens"]
    rule = c["server_rules"]["last_block"]
    assert (rule["status"], rule["against"]) == ("detected", 0) and rule["cases"] >= 3
    assert miss["last_block"] == skipped and miss["unexplained"] == 0
    text = summary_table(summary)
    assert "server rule: whole-block prompt's last block" in text
    assert (
        "the last 32-token block of a prompt of a whole number of blocks is never kept: detected"
        in text
    )


@pytest.mark.slow
async def test_a_rule_the_server_s_source_states_is_known_from_two_cases(tmp_path):
    # Two requests follow a whole-block prompt (a vLLM 0.32 run on Gemma 3 at a pool that
    # evicts nothing had two, 128 tokens each): too few to detect the rule, so the tokens were
    # unexplained. A server whose /v1/models says it is vLLM has the rule in its source.
    tr = trace(sess("w", [(32, 32, 0.0)] * 3), *(sess(f"p{i}", PARTIAL) for i in range(4)))
    vllm = await replay_into(
        tmp_path / "vllm", tr, [dict(block_size=32, skip_last_block=True, owned_by="vllm")]
    )
    rule, miss = vllm["cache"]["server_rules"]["last_block"], vllm["cache"]["miss_tokens"]
    assert (rule["status"], rule["cases"], rule["against"]) == ("known", 2, 0)
    assert "replay_boundaries" in rule["known"]
    assert miss["last_block"] == 2 * 32 and miss["unexplained"] == 0
    assert "never kept: known from the server's source (2 cases)" in summary_table(vllm)
    other = await replay_into(tmp_path / "other", tr, [dict(block_size=32, skip_last_block=True)])
    rule, miss = other["cache"]["server_rules"]["last_block"], other["cache"]["miss_tokens"]
    assert (rule["status"], rule["cases"]) == ("too few", 2) and "known" not in rule
    assert miss["unexplained"] == 2 * 32 and miss["last_block"] == 0


def test_known_rules_need_every_endpoint_to_say_the_same_server():
    from harness.analysis.ideal.rules import known_rules

    def manifest(*owners):
        served = [{"endpoint": f"e{i}", "owned_by": o} for i, o in enumerate(owners)]
        return {"target": {"served_by": served}, "endpoints": [f"e{i}" for i in range(2)]}

    assert set(known_rules(manifest("vllm", "vllm"))) == {"last_block"}
    assert known_rules(manifest("vllm", "sglang")) == {}
    assert known_rules(manifest("vllm")) == {}  # one endpoint did not say
    assert known_rules({"target": {"served_by": []}}) == {}


@pytest.mark.slow
async def test_eviction_is_still_named_where_it_happens(tmp_path):
    # The same prompts, a cache of 6 blocks and three sessions at once: blocks the endpoint
    # computed are pushed out before the session's next turn. It keeps whole-block prompts' last
    # blocks when it can, so that rule is contradicted, not detected.
    summary = await replay_into(
        tmp_path / "small", rule_trace(), [dict(block_size=32, cache_blocks=6)], concurrency=3
    )
    miss, rules = summary["cache"]["miss_tokens"], summary["cache"]["server_rules"]
    lost = server_missed(tmp_path / "small")
    assert lost > 0 and miss["evicted"] >= 0.5 * lost
    assert miss["last_block"] == 0 and rules["last_block"]["status"] != "detected"
    assert "evicted" in summary_table(summary)


@pytest.mark.slow
async def test_the_prompt_minus_one_cap_is_seen_and_a_server_without_it_contradicts_it(tmp_path):
    # Every session's first prompt is the shared 32-token system prompt alone: from the second
    # on it is shared whole, and a capped server computes its last 16-token block.
    tr = trace(*(sess(f"s{i}", [(0, 8, 0.0), (8, 8, 0.0)]) for i in range(5)))
    capped = await replay_into(tmp_path / "cap", tr, [dict(block_size=16)])
    rule = capped["cache"]["server_rules"]["prompt_cap"]
    assert (rule["status"], rule["cases"], rule["against"]) == ("detected", 4, 0)
    assert capped["cache"]["miss_tokens"]["prompt_cap"] == 4 * 16
    assert capped["cache"]["miss_tokens"]["evicted"] == 0
    whole = await replay_into(tmp_path / "nocap", tr, [dict(block_size=16, prompt_cap=False)])
    rule = whole["cache"]["server_rules"]["prompt_cap"]
    assert rule["status"] == "contradicted" and rule["against"] == 4
    assert whole["cache"]["beyond_ideal_tokens"] == 4 * 16


@pytest.mark.slow
async def test_no_cache_and_a_second_endpoint_are_not_eviction(tmp_path):
    off = await replay_into(
        tmp_path / "off", rule_trace(), [dict(block_size=32, prefix_cache=False)]
    )
    miss = off["cache"]["miss_tokens"]
    assert off["cache"]["server_rules"]["no_hits"]["status"] == "detected"
    assert miss["evicted"] == 0 and miss["no_hits"] > 0
    # Round robin over two endpoints with infinite caches: a turn that lands where its session's
    # last turn did not finds its prefix computed elsewhere, not lost.
    two = await replay_into(
        tmp_path / "two",
        rule_trace(),
        [dict(block_size=32), dict(block_size=32)],
        routing="round_robin",
    )
    miss = two["cache"]["miss_tokens"]
    assert miss["misrouted"] > 0 and miss["evicted"] == 0
    moved = two["cache"]["session_moves"]["moved"]
    assert moved["misrouted_tokens"] > 0 and moved["evicted_tokens"] == 0
    assert "requests moved endpoint: misrouted" in summary_table(two)


@pytest.mark.slow
async def test_the_rule_on_a_generated_trace(tmp_path):
    # Prompts of drawn lengths: a few of them a whole number of 32-token blocks.
    from harness.trace.generate import generate
    from harness.trace.profile import load_profile
    from tests.analysis.test_granularity import no_think
    from tests.trace.tiny import CPU_PROFILE

    tr = no_think(generate(load_profile(CPU_PROFILE), seed=5, sessions=3))
    summary = await replay_into(tmp_path / "gen", tr, [dict(block_size=32, skip_last_block=True)])
    c, skipped = summary["cache"], server_missed(tmp_path / "gen")
    assert skipped >= 3 * 32
    assert c["miss_tokens"]["evicted"] <= skipped / 4
    assert c["miss_tokens"]["evicted"] < 0.005 * c["prompt_tokens"]
    assert c["server_rules"]["last_block"]["status"] == "detected"
    assert c["miss_tokens"]["last_block"] == skipped


def test_held_prefixes_keep_what_a_whole_block_prompt_keeps():
    from harness.analysis.ideal.established import HeldPrefixes
    from harness.trace.content import Segment

    def seg(name: str, n: int) -> Segment:
        return Segment((name,), n, "user")

    held = HeldPrefixes()
    a0 = [seg("sys", 32), seg("a0", 32)]  # 64 tokens: two 32-token blocks, the last not kept
    end = held.insert(a0, 0, 0, keep=32)
    a1 = [seg("out", 8), seg("a1", 24)]  # the next turn appends 32
    assert held.shared(a1, end, 64) == (64, 32)  # resumed: shares a0 whole, of it 32 kept
    assert held.shared([*a0, *a1]) == (64, 32)  # walked from the root: the same
    assert held.shared([seg("sys", 32), seg("b", 8)]) == (32, 32)
    end1 = held.insert(a1, end, 64, keep=64)  # a1 (96: three blocks) keeps a0's last block
    assert held.shared(a1, end, 64) == (96, 64)  # ... but not its own
    assert held.shared([*a0, *a1]) == (96, 64)
    assert held.shared([seg("a2", 4)], end1, 96) == (96, 64)
    held.insert([*a0, *a1, seg("a2", 4)], 0, 0, keep=100)  # 100 tokens: kept whole
    assert held.shared([seg("a2", 4)], end1, 96) == (100, 100)
    partial = [seg("sys", 32), seg("a0", 20)]  # a partial segment of a held one
    assert held.shared(partial) == (52, 52)
