"""A run's requests as the what-if replays them: the prompt the driver sent, how long a reply it
asked for, and what each send waited on.

A closed loop sends a request when something it waits on ends: a session's next turn after its
previous turn (plus the think time), a subagent's first turn after the parent turn that forked it,
a parent's turn after its subagents, a new task after a task ended. So each request gets a
`trigger`, the request that ended last before it was sent among its own session, its parent and
its subagents (a first turn of a root session: any request), and a `gap`, the measured seconds
between that end and its send. Replayed at another pool, a request is sent `gap` seconds after
its trigger ends *there*, so a slower server sends later, as the real closed loop would.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.trace.cycles import cycle_salt, split_cycled_id
from harness.trace.model import Trace
from harness.trace.requests import RequestSource


@dataclass
class ReplayRequest:
    row: int  # its row in the run's records
    session: str
    root: str  # its root session: the routing's sticky key (subagents follow their parent)
    turn: int
    t_sent: float  # measured, seconds from the run's start
    max_tokens: int  # what the driver asked for
    gen_tokens: int  # what the server produced (the replay generates as many)
    trigger: int | None  # the request whose end released this send (None: sent at t_sent)
    gap: float  # seconds between the trigger's end and this send, measured
    new_task: bool  # a closed loop's next task: sent when the next task ends (trigger unused)
    phase_measure: bool  # in the measurement window: counts in the hit rate if it ends ok


def replay_requests(records: pd.DataFrame, closed_loop: bool = True) -> list[ReplayRequest]:
    """Every sent request of the run, in send order, with its trigger (module docstring)."""
    sent = _in_send_order(records[records["t_sent"].notna()])
    done = _end_times(sent)
    parent = sent["parent_session_id"].where(sent["parent_session_id"].notna(), None).tolist()
    sessions = sent["session_id"].tolist()
    parents = dict(zip(sessions, parent, strict=True))
    roots = [_root(s, parents) for s in sessions]
    ends = _Ends(_family_ends(roots, done))
    out: list[ReplayRequest] = []
    for i, (row, r) in enumerate(zip(sent.index.tolist(), sent.itertuples(), strict=True)):
        trigger = ends.latest_before(r.t_sent, sessions[i], parent[i])
        gap = r.t_sent - done[trigger] if trigger is not None else 0.0
        out.append(
            ReplayRequest(
                row=int(row),
                session=sessions[i],
                root=roots[i],
                turn=int(r.turn),
                t_sent=float(r.t_sent),
                max_tokens=_max_tokens(r),
                gen_tokens=max(1, int(np.nan_to_num(r.completion_tokens, nan=1))),
                trigger=trigger,
                gap=max(0.0, float(gap)),
                new_task=closed_loop
                and trigger is not None
                and ends.starts_task(sessions[i], parent[i]),
                phase_measure=r.phase == "measure",
            )
        )
        ends.add(i, done[i], sessions[i], parent[i])
    return out


def _in_send_order(sent: pd.DataFrame) -> pd.DataFrame:
    """By send time; sends of one instant (subagents forked together) in the driver's order,
    the spawn order, which their ids follow (a1, a2, ... a10). The file's order is end order."""
    t, sid, turn = sent["t_sent"].tolist(), sent["session_id"].tolist(), sent["turn"].tolist()
    order = sorted(range(len(sent)), key=lambda i: (t[i], _natural(sid[i]), turn[i]))
    return sent.iloc[order]


def _family_ends(roots: list[str], done: np.ndarray) -> list[tuple[float, int]]:
    """(end, request) of each task's last request: a closed loop starts a task when one ends."""
    last: dict[str, int] = {}
    for i, root in enumerate(roots):
        if root not in last or done[i] >= done[last[root]]:
            last[root] = i
    return sorted((float(done[i]), i) for i in last.values())


def _natural(session: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", session))


def _root(session: str, parents: dict[str, str | None]) -> str:
    seen = {session}
    while parents.get(session) is not None and parents[session] not in seen:
        session = parents[session]  # type: ignore[assignment]
        seen.add(session)
    return session


def _max_tokens(r) -> int:
    expected = r.output_tokens_expected
    if expected is None or np.isnan(expected):
        expected = r.completion_tokens
    return max(1, int(np.nan_to_num(expected, nan=1)))


def _end_times(sent: pd.DataFrame) -> np.ndarray:
    done = sent["t_done"].to_numpy(dtype=float)
    last = sent["t_last_token"].to_numpy(dtype=float)
    return np.where(np.isnan(done), np.where(np.isnan(last), sent["t_sent"], last), done)


class _Ends:
    """Ends seen so far, by session and by parent; and every task's last end (the run's requests
    end in any order: each lookup keeps the latest end at or before a given send)."""

    def __init__(self, family_ends: list[tuple[float, int]]) -> None:
        self.by_session: dict[str, list[tuple[float, int]]] = {}
        self.children: dict[str, list[str]] = {}
        self.family_ends = family_ends
        self.family_times = [e for e, _ in family_ends]

    def add(self, i: int, end: float, session: str, parent: str | None) -> None:
        if session not in self.by_session:
            self.by_session[session] = []
            if parent is not None:
                self.children.setdefault(parent, []).append(session)
        self.by_session[session].append((end, i))

    def starts_task(self, session: str, parent: str | None) -> bool:
        """Whether a request of `session` not yet added is a task's first."""
        return parent is None and session not in self.by_session

    def latest_before(self, t: float, session: str, parent: str | None) -> int | None:
        family = [session, *self.children.get(session, [])]
        if parent is not None:
            family.append(parent)
        ends = [e for s in family for e in self.by_session.get(s, [])]
        if not ends and parent is None:  # a new task: released by the task that ended last
            k = bisect.bisect_right(self.family_times, t + 1e-9)
            return self.family_ends[k - 1][1] if k else None
        before = [e for e in ends if e[0] <= t + 1e-9]
        return max(before)[1] if before else None


class Prompts:
    """The token ids the driver sent, per cycle of the trace (`<id>@c<n>` sessions carry their
    cycle's salt, harness.trace.cycles)."""

    def __init__(self, trace: Trace, salt: str | None) -> None:
        self.trace, self.salt = trace, salt
        self.sources: dict[int, RequestSource] = {}
        self.built: dict[tuple[str, int], np.ndarray] = {}

    def token_ids(self, session: str, turn: int) -> np.ndarray:
        tid, cycle = split_cycled_id(session)
        source = self.sources.get(cycle)
        if source is None:
            source = self.sources[cycle] = RequestSource(
                self.trace,
                api="completions",
                prompt_format="tokens",
                salt=cycle_salt(self.salt, cycle),
            )
        key = (session, turn)
        if key not in self.built:  # both replays ask for each prompt: build it once
            body = source.prompt(tid, turn).body
            assert isinstance(body, np.ndarray)
            self.built[key] = body.astype(np.int32)
        return self.built[key]
