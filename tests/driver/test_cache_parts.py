"""Hit vs ideal by prompt segment and by call kind (summary.json `cache.by_segment`,
`cache.by_call_kind`), on a hand-built task replayed against a server that keeps every block
(the ideal by construction): a main session that forks one subagent and spawns another, joins
them, and goes on after a long think."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from harness.analysis.call_kinds import call_kinds
from harness.analysis.loader import load_run
from harness.analysis.sessions.graph import task_graph
from harness.analysis.summary import analyze
from harness.report.text import summary_table
from harness.trace.content import Content
from harness.trace.model import Session
from tests.driver.helpers import replay
from tests.trace.tiny import make_trace, turn

SYSTEM = 200


def task_trace():
    main = Session(
        "s0",
        0.0,
        SYSTEM,
        "sys0",
        (turn(40, 10, spawns=("s0.a1", "s0.a2")), turn(30, 10), turn(25, 10)),
    )
    fork = Session("s0.a1", 0.0, SYSTEM, "sys0", (turn(20, 8), turn(15, 8)), "s0", 0, "fork")
    spawn = Session("s0.a2", 0.0, SYSTEM, "sys0", (turn(20, 8),), "s0", 0, "spawn")
    return make_trace(main, fork, spawn)


def test_prompt_labels_follow_the_task():
    content = Content(task_trace())
    kinds = lambda sid, k: [(name, seg.length) for name, seg in content.labelled(sid, k)]  # noqa: E731
    assert kinds("s0", 0) == [("system", SYSTEM), ("new_input", 40)]
    # the join: the parent's history, then the subagents' reports, then its own new input
    joined = kinds("s0", 1)
    assert joined[:3] == [("system", SYSTEM), ("history", 40), ("previous_output", 10)]
    assert [n for n, _ in joined[3:]] == ["reports", "reports", "new_input"]
    assert sum(length for _, length in joined[3:]) == 30
    # a fork starts from its parent's context; a spawn from the system prompt alone
    assert kinds("s0.a1", 0) == [
        ("system", SYSTEM),
        ("inherited", 40),
        ("inherited", 10),
        ("new_input", 20),
    ]
    assert [n for n, _ in kinds("s0.a1", 1)] == [
        "system",
        "inherited",
        "inherited",
        "history",
        "previous_output",
        "new_input",
    ]
    assert kinds("s0.a2", 0) == [("system", SYSTEM), ("new_input", 20)]
    assert [length for _, length in kinds("s0", 2)] == [
        seg.length for seg in content.segments("s0", 2)
    ]


@pytest.mark.slow
async def test_by_segment_and_call_kind_on_a_replayed_task(make_server, tmp_path):
    srv = await make_server(keep_body=False)
    await replay(task_trace(), srv.url, tmp_path, concurrency=1, api="completions")
    a = analyze(load_run(tmp_path))
    cache = a.summary["cache"]
    seg, calls = cache["by_segment"], cache["by_call_kind"]
    assert cache["segments"]["positions"] == "exact"
    assert set(seg) == {"system", "inherited", "history", "previous_output", "reports", "new_input"}
    # every prompt token is in one segment, and so is every hit
    assert sum(v["prompt_tokens"] for v in seg.values()) == cache["prompt_tokens"]
    assert sum(v["cached_tokens"] for v in seg.values()) == pytest.approx(
        float(a.misses["cached"].sum())
    )
    assert seg["new_input"]["ideal_hit_rate"] == 0.0  # a new input was never sent before
    assert seg["reports"]["ideal_hit_rate"] == 0.0  # a report was an output, never a prompt
    # a server that keeps every block hits the ideal; earlier turns were all sent before, but for
    # the partial block where the shared prefix ends
    assert seg["history"]["hit_rate"] == seg["history"]["ideal_hit_rate"] > 0.8
    assert seg["previous_output"]["ideal_hit_rate"] < 1.0  # a reply is new to every prompt
    # the system prompt is shared from the first call on: every later call hits all of it, but the
    # spawned subagent, which shares nothing more, only to its last whole block
    assert seg["system"]["ideal_hit_rate"] == pytest.approx((4 * SYSTEM + 192) / (6 * SYSTEM))
    assert [k for k in calls] == ["session_first", "subagent_first", "after_join", "steady"]
    assert sum(v["requests"] for v in calls.values()) == 6
    first = calls["subagent_first"]
    assert first["requests"] == 2 and set(first["modes"]) == {"fork", "spawn"}
    fork, spawn = first["modes"]["fork"], first["modes"]["spawn"]
    assert fork["ideal_hit_rate"] > spawn["ideal_hit_rate"] > 0  # a fork shares more
    assert spawn["hit_rate"] == pytest.approx(192 / (SYSTEM + 20))
    assert calls["session_first"]["hit_rate"] == 0.0
    assert set(calls["after_join"]["by_segment"]) == {
        "system",
        "history",
        "previous_output",
        "reports",
        "new_input",
    }
    text = summary_table(a.summary)
    assert "cache by prompt segment" in text and "subagent first call" in text
    assert "forked" in text and "spawned" in text


def test_a_long_idle_gap_is_its_own_call_kind():
    rows = []
    for k, (sent, done) in enumerate([(0.0, 1.0), (2.0, 3.0), (100.0, 101.0), (102.0, 103.0)]):
        rows.append(
            {
                "request_id": f"s:{k}",
                "session_id": "s",
                "parent_session_id": None,
                "agent": "main",
                "turn": k,
                "t_scheduled": sent,
                "t_sent": sent,
                "t_done": done,
                "status": "ok",
                "phase": "measure",
            }
        )
    records = pd.DataFrame(rows)
    kinds = call_kinds(records, task_graph(records, None))
    assert kinds.tolist() == ["session_first", "steady", "after_long_think", "steady"]
    assert call_kinds(records, task_graph(records, None), long_think_s=200).tolist()[2] == "steady"


def test_unknown_segments_without_a_trace(tmp_path):
    from tests.analysis.synthetic import write_synthetic_run

    run = load_run(write_synthetic_run(tmp_path, "r", n_tasks=5))
    cache = analyze(dataclasses.replace(run, trace=None)).summary["cache"]
    assert cache["by_segment"] == {} and "no matching trace" in cache["segments"]["note"]
    assert cache["by_call_kind"]["subagent_first"]["requests"] == 5
