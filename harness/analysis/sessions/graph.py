"""The request graph of each task: turn order, spawns and joins, on integer session codes.

A *task* is a main session with all its subagents. A turn follows the session's previous turn; a
subagent's first turn follows the parent turn that spawned it; the parent's next turn also waits
for (joins) the subagents it spawned. Which parent turn spawned a subagent comes from the trace
when the run folder has one; otherwise it is inferred from timing: the parent's last turn that
ended before the subagent's first send, joined if the parent's next turn was sent after the
subagent ended. Sessions are factorized to integer codes once, so grouping a million records
never hashes strings twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.trace.cycles import split_cycled_id
from harness.trace.model import Trace

EPS = 1e-9
GRAPH_COLUMNS = (
    "request_id",
    "session_id",
    "parent_session_id",
    "agent",
    "turn",
    "t_scheduled",
    "t_sent",
    "t_done",
    "status",
    "phase",
)
MAX_DEPTH = 64  # subagent nesting levels followed up to the main session (a cycle stops here)


@dataclass(frozen=True)
class Sessions:
    codes: np.ndarray  # per record: its session's code
    ids: np.ndarray  # per code: the session id
    parent: np.ndarray  # per code: the parent's code, -1 for a main session (or an unknown parent)

    @property
    def roots(self) -> np.ndarray:
        """Per code: the code of its task's main session."""
        root = np.arange(self.parent.size)
        for _ in range(MAX_DEPTH):
            up = self.parent[root]
            if not (up >= 0).any():
                break
            root = np.where(up >= 0, up, root)
        return root


def factorize_sessions(records: pd.DataFrame) -> Sessions:
    codes, uniques = pd.factorize(records["session_id"].to_numpy(), sort=False)
    _, first = np.unique(codes, return_index=True)
    parent_ids = records["parent_session_id"].to_numpy()[first]
    parent = pd.Index(uniques).get_indexer(parent_ids)
    return Sessions(codes=codes, ids=np.asarray(uniques, dtype=object), parent=parent)


def task_roots(records: pd.DataFrame) -> pd.Series:
    """The main session each record's session belongs to (aligned to `records`)."""
    s = factorize_sessions(records)
    return pd.Series(s.ids[s.roots][s.codes], index=records.index)


@dataclass
class TaskGraph:
    recs: pd.DataFrame  # records sorted by session and turn; position = row id below
    edges: pd.DataFrame  # src, dst, kind ("turn" | "spawn" | "join"); joins also spawn_row
    best_pred: np.ndarray  # per row: the predecessor that finished last, -1 if none
    task_code: np.ndarray  # per row: its task (main session) code
    last_row: pd.Series  # task id -> its last-finishing row

    def critical_path(self, task: str) -> list[str]:
        row, path = int(self.last_row[task]), list[int]()
        while row >= 0 and len(path) <= len(self.recs):
            path.append(row)
            row = int(self.best_pred[row])
        return list(self.recs["request_id"].to_numpy()[path[::-1]])

    def links(self, task: str) -> list[tuple[str, str]]:
        """Spawn and join edges of a task, as (from request_id, to request_id)."""
        ids, tasks = self.recs["request_id"].to_numpy(), self.recs["task"].to_numpy()
        e = self.edges[
            (self.edges["kind"] != "turn") & (tasks[self.edges["dst"].to_numpy()] == task)
        ]
        return list(zip(ids[e["src"].to_numpy()], ids[e["dst"].to_numpy()], strict=True))


def task_graph(records: pd.DataFrame, trace: Trace | None) -> TaskGraph:
    s = factorize_sessions(records)
    t_sent, turn = records["t_sent"].to_numpy(dtype=float), records["turn"].to_numpy(dtype=float)
    order = np.lexsort((t_sent, turn, s.codes))
    recs = records[[c for c in GRAPH_COLUMNS if c in records]].iloc[order].reset_index(drop=True)
    codes = s.codes[order]
    task_code = s.roots[codes]
    recs["task"] = s.ids[task_code]
    recs["session_code"] = codes
    t_done = recs["t_done"].fillna(-np.inf).to_numpy()
    edges = pd.concat(
        [_turn_edges(codes), *_spawn_join_edges(recs, codes, s, trace)], ignore_index=True
    )
    best = np.full(len(recs), -1, dtype=np.int64)
    if len(edges):
        ranked = edges.assign(v=t_done[edges["src"].to_numpy()]).sort_values(
            ["dst", "v"], kind="stable"
        )
        last = ranked.drop_duplicates("dst", keep="last")
        best[last["dst"].to_numpy()] = last["src"].to_numpy()
    by_task = np.lexsort((t_done, task_code))
    ends = (
        np.flatnonzero(np.r_[task_code[by_task][1:] != task_code[by_task][:-1], True])
        if len(recs)
        else by_task
    )
    last_row = pd.Series(by_task[ends], index=s.ids[task_code[by_task][ends]])
    return TaskGraph(recs=recs, edges=edges, best_pred=best, task_code=task_code, last_row=last_row)


def _turn_edges(codes: np.ndarray) -> pd.DataFrame:
    dst = np.flatnonzero(np.r_[False, codes[1:] == codes[:-1]])
    return pd.DataFrame({"src": dst - 1, "dst": dst, "kind": "turn"})


def _spawn_join_edges(
    recs: pd.DataFrame, codes: np.ndarray, s: Sessions, trace: Trace | None
) -> list[pd.DataFrame]:
    n = len(recs)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if n else np.array([], dtype=int)
    t_sent, t_done = recs["t_sent"].to_numpy(dtype=float), recs["t_done"].to_numpy(dtype=float)
    by_done = np.lexsort((np.nan_to_num(t_done, nan=-np.inf), codes))
    last = by_done[np.r_[starts[1:], n] - 1] if n else starts  # per code: its last-finishing row
    children = np.flatnonzero(s.parent >= 0)
    if not children.size:
        return []
    parent = s.parent[children]
    if trace is not None:
        spawn_turn, joins = map(
            np.array, zip(*(_from_trace(trace, s.ids[c]) for c in children), strict=True)
        )
    else:
        spawn_turn = _spawn_by_timing(recs, codes, children, parent, t_sent[starts[children]])
        joins = np.ones(children.size, dtype=bool)
    lookup = _TurnLookup(codes, recs["turn"].to_numpy(dtype=float))
    spawn_row, join_row = lookup(parent, spawn_turn), lookup(parent, spawn_turn + 1)
    joins = joins.astype(bool) & (spawn_row >= 0) & (join_row >= 0)
    if trace is None:  # a subagent still running when the parent went on was not joined
        joins &= t_sent[np.maximum(join_row, 0)] >= t_done[last[children]] - EPS
    has = spawn_row >= 0
    spawns = pd.DataFrame({"src": spawn_row[has], "dst": starts[children][has], "kind": "spawn"})
    joined = pd.DataFrame(
        {
            "src": last[children][joins],
            "dst": join_row[joins],
            "kind": "join",
            "spawn_row": spawn_row[joins],
        }
    )
    return [spawns, joined]


class _TurnLookup:
    """Row of (session code, turn), -1 when that turn has no record."""

    def __init__(self, codes: np.ndarray, turns: np.ndarray) -> None:
        self.width = int(np.nanmax(turns)) + 2 if np.isfinite(turns).any() else 1
        keys = np.where(
            np.isfinite(turns), codes * self.width + np.nan_to_num(turns, nan=-1), -1
        ).astype(np.int64)
        self.keys, self.rows = np.unique(keys, return_index=True)

    def __call__(self, codes: np.ndarray, turns: np.ndarray) -> np.ndarray:
        ok = np.isfinite(turns) & (turns >= 0) & (turns < self.width)
        q = np.where(ok, codes * self.width + np.nan_to_num(turns, nan=0), -2).astype(np.int64)
        i = np.minimum(np.searchsorted(self.keys, q), len(self.keys) - 1)
        return np.where(ok & (self.keys[i] == q), self.rows[i], -1)


def _from_trace(trace: Trace, sid: str) -> tuple[float, bool]:
    """(spawning turn, joined) of a subagent; a cycled pass (`<id>@c<n>`) is its trace session's."""
    sid, _ = split_cycled_id(sid)
    child = trace.by_id.get(sid)
    parent = trace.by_id.get(child.parent) if child is not None and child.parent else None
    if child is None or parent is None:
        return np.nan, False
    for i, turn in enumerate(parent.turns):
        if sid in turn.spawns:
            return float(i), i + 1 < len(parent.turns)
    return (float(child.fork_turn) if child.fork_turn is not None else np.nan), False


def _spawn_by_timing(recs, codes, children, parent, first_sent) -> np.ndarray:
    """Per child: the parent's last turn that ended before the child's first send."""
    left = pd.DataFrame({"by": parent, "t": first_sent + EPS, "i": np.arange(children.size)})
    left = left.dropna(subset=["t"]).sort_values("t")
    right = pd.DataFrame(
        {"by": codes, "t": recs["t_done"].to_numpy(dtype=float), "turn": recs["turn"].to_numpy()}
    )
    right = right.dropna(subset=["t"]).sort_values("t")
    merged = pd.merge_asof(left, right, on="t", by="by", direction="backward")
    out = np.full(children.size, np.nan)
    out[merged["i"].to_numpy()] = merged["turn"].to_numpy(dtype=float)
    return out
