"""Session roll-ups: task completion time, critical path through forks and joins, join waits.

A *task* is a main session with all its subagents. Its requests form a graph: a turn follows the
session's previous turn; a subagent's first turn follows the parent turn that spawned it; the
parent's next turn also waits for (joins) the subagents it spawned. The critical path walks back
from the task's last request, each step to the dependency that finished last. Which parent turn
spawned a subagent comes from the trace when the run folder has one, otherwise it is inferred from
timing (the parent's last turn that ended before the subagent's first send) and `structure` says so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.analysis.metrics import percentiles
from harness.trace.model import Trace

EPS = 1e-9


@dataclass
class _Session:
    rows: list[int]  # record positions, by turn
    parent: str | None
    spawn_turn: int | None = None  # parent's turn after which this session started
    joins: bool = False  # the parent's next turn waited for this session
    children: list[str] = field(default_factory=list)


def task_roots(records: pd.DataFrame) -> pd.Series:
    """The main session each record's session belongs to (aligned to `records`)."""
    parents = _parent_map(records)
    cache: dict[str, str] = {}

    def root(sid: str) -> str:
        seen = []
        while sid not in cache and parents.get(sid) is not None and sid not in seen:
            seen.append(sid)
            sid = parents[sid]
        top = cache.get(sid, sid)
        for s in seen:
            cache[s] = top
        return top

    return records["session_id"].map(root)


def _parent_map(records: pd.DataFrame) -> dict:
    pairs = records[["session_id", "parent_session_id"]].drop_duplicates("session_id")
    return {s: (p if isinstance(p, str) else None) for s, p in pairs.itertuples(index=False)}


def session_summary(records: pd.DataFrame, ttft: pd.Series, trace: Trace | None) -> tuple[dict, pd.DataFrame]:
    """Summary dict and a per-task table. `ttft` is aligned to the measured ok records."""
    tasks = task_table(records, trace)
    per_session = ttft.groupby(records.loc[ttft.index, "session_id"].to_numpy()).agg(["mean", "max", "count"])
    done = tasks[tasks["complete"]]
    summary = {
        "structure": "trace" if trace is not None else "inferred",
        "tasks": int(len(tasks)),
        "tasks_complete": int(len(done)),
        "sessions": int(records["session_id"].nunique()),
        "task_completion_s": percentiles(done["completion_s"]),
        "critical_path_service_s": percentiles(done["critical_path_service_s"]),
        "critical_path_requests": percentiles(done["critical_path_requests"]),
        "join_wait_s": percentiles(done["join_wait_s"]),
        "session_ttft_mean_s": percentiles(per_session["mean"]),
    }
    return summary, tasks


def task_table(records: pd.DataFrame, trace: Trace | None) -> pd.DataFrame:
    recs = records.sort_values(["session_id", "turn", "t_sent"], kind="stable").reset_index(drop=True)
    sessions = _sessions(recs, trace)
    cols = {c: recs[c].to_numpy() for c in ("request_id", "session_id", "turn", "t_sent", "t_done", "status", "phase", "agent")}
    start = recs["t_scheduled"].fillna(recs["t_sent"]).to_numpy(dtype=float)
    cols["start"] = start
    roots = task_roots(recs).to_numpy()
    by_root: dict[str, list[str]] = defaultdict(list)
    for sid in sessions:
        by_root[roots[sessions[sid].rows[0]]].append(sid)
    rows = [_task_row(root, members, sessions, cols, trace) for root, members in by_root.items()]
    return pd.DataFrame(rows, columns=TASK_COLUMNS)


TASK_COLUMNS = [
    "task",
    "sessions",
    "requests",
    "complete",
    "completion_s",
    "critical_path_service_s",
    "critical_path_requests",
    "critical_path_sub_requests",
    "join_wait_s",
    "critical_path",
    "links",  # (from request_id, to request_id) across sessions: spawns and joins
]


def _sessions(recs: pd.DataFrame, trace: Trace | None) -> dict[str, _Session]:
    parents = _parent_map(recs)
    sessions: dict[str, _Session] = {}
    for pos, sid in enumerate(recs["session_id"].to_numpy()):
        if sid not in sessions:
            sessions[sid] = _Session(rows=[], parent=parents.get(sid))
        sessions[sid].rows.append(pos)
    turns = recs["turn"].to_numpy()
    t_sent, t_done = recs["t_sent"].to_numpy(), recs["t_done"].to_numpy()
    for sid, s in sessions.items():
        if s.parent is None or s.parent not in sessions:
            continue
        sessions[s.parent].children.append(sid)
        parent_rows = sessions[s.parent].rows
        if trace is not None and sid in trace.by_id:
            s.spawn_turn, s.joins = _spawn_from_trace(trace, sid)
        else:
            s.spawn_turn, s.joins = _spawn_from_timing(parent_rows, s.rows, turns, t_sent, t_done)
    return sessions


def _spawn_from_trace(trace: Trace, sid: str) -> tuple[int | None, bool]:
    child = trace.by_id[sid]
    parent = trace.by_id.get(child.parent or "")
    if parent is None:
        return None, False
    for i, turn in enumerate(parent.turns):
        if sid in turn.spawns:
            return i, i + 1 < len(parent.turns)
    return child.fork_turn, False


def _spawn_from_timing(parent_rows, rows, turns, t_sent, t_done) -> tuple[int | None, bool]:
    first_sent, last_done = t_sent[rows[0]], np.nanmax(t_done[rows])
    before = [r for r in parent_rows if t_done[r] <= first_sent + EPS]
    if not before:
        return None, False
    spawn = int(turns[before[-1]])
    nxt = [r for r in parent_rows if turns[r] == spawn + 1]
    return spawn, bool(nxt) and t_sent[nxt[0]] >= last_done - EPS


def _task_row(root: str, members: list[str], sessions: dict[str, _Session], cols: dict, trace: Trace | None) -> list:
    rows = [r for sid in members for r in sessions[sid].rows]
    complete = all(cols["status"][r] == "ok" and cols["phase"][r] == "measure" for r in rows)
    if trace is not None and root in trace.by_id:
        expected = sum(len(s.turns) for s in trace.family(root))
        complete = complete and expected == len(rows)
    preds, join_wait = _dependencies(members, sessions, cols)
    t_done = cols["t_done"]
    last = max(rows, key=lambda r: t_done[r])
    path = _walk_back(last, preds, t_done)
    service = float(sum(t_done[r] - cols["t_sent"][r] for r in path))
    completion = float(t_done[last] - min(cols["start"][r] for r in rows))
    ids = [cols["request_id"][r] for r in path]
    subs = sum(1 for r in path if cols["agent"][r] == "sub")
    sid, rid = cols["session_id"], cols["request_id"]
    links = [(rid[p], rid[r]) for r, ps in preds.items() for p in ps if sid[p] != sid[r]]
    return [root, len(members), len(rows), complete, completion, service, len(path), subs, join_wait, ids, links]


def _dependencies(members: list[str], sessions: dict[str, _Session], cols: dict) -> tuple[dict[int, list[int]], float]:
    """Each request's predecessors, and the task's total time waiting on joins."""
    t_done, turns = cols["t_done"], cols["turn"]
    preds: dict[int, list[int]] = defaultdict(list)
    waits: dict[int, float] = {}  # join request -> how long its session waited for subagents
    for sid in members:
        s = sessions[sid]
        at_turn = {int(turns[r]): r for r in s.rows if turns[r] == turns[r]}
        for prev, cur in zip(s.rows, s.rows[1:], strict=False):
            preds[cur].append(prev)
        for child_id in s.children:
            child = sessions[child_id]
            spawn_row = at_turn.get(child.spawn_turn) if child.spawn_turn is not None else None
            if spawn_row is None:
                continue
            preds[child.rows[0]].append(spawn_row)
            join_row = at_turn.get(child.spawn_turn + 1) if child.joins else None
            if join_row is not None:
                child_last = max(child.rows, key=lambda r: t_done[r])
                preds[join_row].append(child_last)
                wait = max(0.0, float(t_done[child_last] - t_done[spawn_row]))
                waits[join_row] = max(waits.get(join_row, 0.0), wait)
    return preds, float(sum(waits.values()))


def _walk_back(last: int, preds: dict[int, list[int]], t_done: np.ndarray) -> list[int]:
    path, cur, seen = [last], last, {last}
    while preds.get(cur):
        cur = max(preds[cur], key=lambda r: t_done[r])
        if cur in seen:
            break
        seen.add(cur)
        path.append(cur)
    return path[::-1]
