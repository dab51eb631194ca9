"""Each rule of session reconstruction (harness/record/sessions.py), on requests made by hand:
a context is the tools' key, then one key per message; times are sends and ends."""

from __future__ import annotations

from harness.record.sessions import Captured, reconstruct

SYS = ("tools", "sys")


def req(t: float, *messages: str, end: float | None = None, calls: int = 0, **headers) -> Captured:
    """Messages whose name starts with "a" are the assistant's."""
    replies = frozenset(len(SYS) + k for k, m in enumerate(messages) if m.startswith("a"))
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
    return Captured(t, t + 1 if end is None else end, SYS + messages, 2, hdrs, calls, replies)


def shape(captured: list[Captured]) -> list[tuple]:
    """Per session, parents first: its requests, its parent's first request, mode, fork turn,
    and the parent's turn it started after."""
    plans = reconstruct(captured)
    return [
        (p.requests, p.parent.requests[0] if p.parent else None, p.mode, p.fork_turn, p.after)
        for p in plans
    ]


def test_a_request_that_extends_the_last_one_continues_its_session():
    reqs = [req(0, "u1"), req(2, "u1", "a1", "t1"), req(4, "u1", "a1", "t1", "a2", "t2")]
    assert shape(reqs) == [([0, 1, 2], None, None, None, None)]


def test_a_session_goes_on_only_once_its_request_ended():
    """Sent while the earlier request was still running, it shares only the opening: new."""
    reqs = [req(0, "u1", end=5), req(2, "u1", "a1", "t1")]
    assert shape(reqs) == [([0], None, None, None, None), ([1], None, None, None, None)]


def test_an_identical_opening_starts_a_new_session():
    """A task run twice, a subagent started twice: the same first request is not a retry."""
    reqs = [req(0, "u1"), req(2, "u1", "a1", "t1"), req(4, "u1"), req(6, "u1", "a9", "t9")]
    assert [p[0] for p in shape(reqs)] == [[0, 1], [2, 3]]


def test_of_two_sessions_the_longest_context_it_extends_wins():
    reqs = [
        req(0, "u1"),
        req(0.2, "v1"),
        req(1.5, "u1", "a1", "x1"),
        req(3, "u1", "a1", "x1", "a2", "x2"),
    ]
    # request 2 extends request 0 (not 1); request 3 extends request 2, and request 0 too
    assert [p[0] for p in shape(reqs)] == [[0, 2, 3], [1]]


def test_a_later_continuation_makes_the_earlier_ones_forks():
    """Turn 1's reply starts two subagents forked from its context; the parent's next turn is
    sent after they ended (the join) and extends turn 1 too: it is the parent's, they forks."""
    reqs = [
        req(0, "u1"),
        req(2, "u1", "a1", "t1"),  # turn 1
        req(4, "u1", "a1", "t1", "a2", "f1"),  # fork A, first turn
        req(4.5, "u1", "a1", "t1", "a2", "g1"),  # fork B (A still running)
        req(6, "u1", "a1", "t1", "a2", "f1", "b1", "f2"),  # fork A, second turn
        req(9, "u1", "a1", "t1", "a2", "r1"),  # the parent, joining
    ]
    assert shape(reqs) == [
        ([0, 1, 5], None, None, None, None),
        ([2, 4], 0, "fork", 1, 1),
        ([3], 0, "fork", 1, 1),
    ]


def test_going_back_to_an_earlier_turn_makes_the_abandoned_branch_a_fork():
    """An agent rewound to turn 0 goes on from there: the later branch is the session's."""
    reqs = [
        req(0, "u1"),
        req(2, "u1", "a1", "t1"),
        req(4, "u1", "a1", "t1", "a2", "t2"),
        req(6, "u1", "a1", "other"),
    ]
    assert shape(reqs) == [([0, 3], None, None, None, None), ([1, 2], 0, "fork", 0, 0)]


def test_sharing_a_reply_without_extending_a_request_is_a_fork_at_the_turn_shared():
    """A resumed conversation opens with a reply; another request shares it, then diverges."""
    reqs = [req(0, "u1", "a1", "t1"), req(2, "u1", "a1", "t1", "a2", "t2"), req(4, "u1", "a1", "x")]
    assert shape(reqs) == [([0, 1], None, None, None, None), ([2], 0, "fork", 1, 1)]


def test_a_fresh_context_after_a_tool_call_is_a_spawned_subagent():
    reqs = [
        req(0, "u1"),
        req(2, "u1", "a1", "t1", calls=1),
        req(3.5, "s1"),
        req(5, "s1", "sa", "st"),
        req(8, "u1", "a1", "t1", "a2", "report"),
    ]
    assert shape(reqs) == [([0, 1, 4], None, None, None, None), ([2, 3], 0, "spawn", None, 1)]


def test_a_fresh_context_is_a_new_session_without_a_tool_call_or_past_the_window():
    no_call = [req(0, "u1"), req(1.5, "s1")]
    late = [req(0, "u1", calls=1), req(30, "s1")]
    for reqs in (no_call, late):
        assert [p[1] for p in shape(reqs)] == [None, None]


def test_task_headers_keep_tasks_apart():
    """Two tasks with the same system prompt and first message: each continues its own."""
    reqs = [
        req(0, "u1", x_session_id="A"),
        req(0.1, "u1", x_session_id="B"),
        req(2, "u1", "a1", "t1", x_session_id="B"),
        req(2.1, "u1", "a1", "t1", x_session_id="A"),
    ]
    plans = reconstruct(reqs)
    assert [(p.requests, p.scope) for p in plans] == [([0, 3], "A"), ([1, 2], "B")]


def test_agent_headers_name_each_session_and_its_parent():
    reqs = [
        req(0, "u1", x_dynamo_session_id="m"),
        req(2, "s1", x_dynamo_session_id="k", x_dynamo_parent_session_id="m"),
        req(2.2, "u1", "a1", "t1", x_dynamo_session_id="f", x_dynamo_parent_session_id="m"),
        req(4, "u1", "a1", "t9", x_dynamo_session_id="m"),
    ]
    assert shape(reqs) == [
        ([0, 3], None, None, None, None),
        ([1], 0, "spawn", None, 0),
        ([2], 0, "fork", 0, 0),
    ]
