"""Every missed prompt token named by evidence: cold, server rules, in flight, misrouted, evicted,
unexplained (hand-computed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.run import load_run
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
