"""Session roll-ups: task completion time, critical path through forks and joins, join waits.

A *task* is a main session with all its subagents. Its requests form a graph: a turn follows the
session's previous turn; a subagent's first turn follows the parent turn that spawned it; the
parent's next turn also waits for (joins) the subagents it spawned. The critical path walks back
from the task's last request, each step to the predecessor that finished last. Which parent turn
spawned a subagent comes from the trace when the run folder has one, otherwise it is inferred from
timing (the parent's last turn that ended before the subagent's first send) and `structure` says so.
Everything is computed column-wise, so a million records cost seconds, not minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis.metrics import percentiles
from harness.trace.model import Trace

EPS = 1e-9


def task_roots(records: pd.DataFrame) -> pd.Series:
    """The main session each record's session belongs to (aligned to `records`)."""
    pairs = records[["session_id", "parent_session_id"]].drop_duplicates("session_id")
    parents = {s: (p if isinstance(p, str) else None) for s, p in pairs.itertuples(index=False)}
    roots: dict[str, str] = {}
    for sid in parents:
        chain, cur = [], sid
        while cur not in roots and parents.get(cur) is not None and cur not in chain:
            chain.append(cur)
            cur = parents[cur]
        top = roots.get(cur, cur)
        roots.update(dict.fromkeys(chain, top))
        roots.setdefault(cur, top)
    return records["session_id"].map(roots)


@dataclass
class TaskGraph:
    recs: pd.DataFrame  # records sorted by session and turn; position = row id below
    edges: pd.DataFrame  # src, dst, kind ("turn" | "spawn" | "join")
    best_pred: np.ndarray  # per row: the predecessor that finished last, -1 if none
    last_row: pd.Series  # task -> its last-finishing row

    def critical_path(self, task: str) -> list[str]:
        row, path = int(self.last_row[task]), []
        while row >= 0 and len(path) <= len(self.recs):
            path.append(row)
            row = int(self.best_pred[row])
        return list(self.recs["request_id"].to_numpy()[path[::-1]])

    def links(self, task: str) -> list[tuple[str, str]]:
        """Spawn and join edges of a task, as (from request_id, to request_id)."""
        ids, roots = self.recs["request_id"].to_numpy(), self.recs["task"].to_numpy()
        e = self.edges[(self.edges["kind"] != "turn") & (roots[self.edges["dst"].to_numpy()] == task)]
        return list(zip(ids[e["src"].to_numpy()], ids[e["dst"].to_numpy()], strict=True))


def task_graph(records: pd.DataFrame, trace: Trace | None) -> TaskGraph:
    recs = records.sort_values(["session_id", "turn", "t_sent"], kind="stable").reset_index(drop=True)
    if "task" not in recs:
        recs["task"] = task_roots(recs).to_numpy()
    pos = np.arange(len(recs))
    sid = recs["session_id"].to_numpy()
    same = np.zeros(len(recs), dtype=bool)
    same[1:] = sid[1:] == sid[:-1]
    turn_edges = pd.DataFrame({"src": pos[1:][same[1:]] - 1, "dst": pos[1:][same[1:]], "kind": "turn"})
    spawns, joins = _spawn_join_edges(recs, trace)
    edges = pd.concat([turn_edges, spawns, joins], ignore_index=True)
    t_done = recs["t_done"].fillna(-np.inf).to_numpy()
    best = np.full(len(recs), -1, dtype=np.int64)
    if len(edges):
        ranked = edges.assign(v=t_done[edges["src"].to_numpy()]).sort_values(["dst", "v"], kind="stable")
        last = ranked.drop_duplicates("dst", keep="last")
        best[last["dst"].to_numpy()] = last["src"].to_numpy()
    last_row = pd.Series(t_done, index=pos).groupby(recs["task"].to_numpy()).idxmax()
    return TaskGraph(recs=recs, edges=edges, best_pred=best, last_row=last_row)


def _spawn_join_edges(recs: pd.DataFrame, trace: Trace | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    pos = pd.Series(np.arange(len(recs)), index=recs.index)
    g = recs.assign(pos=pos).groupby("session_id", sort=False)
    sessions = pd.DataFrame({
        "parent": g["parent_session_id"].first(),
        "first": g["pos"].first(),
        "first_sent": g["t_sent"].first(),
        "last": recs["t_done"].fillna(-np.inf).set_axis(pos.to_numpy()).groupby(recs["session_id"].to_numpy()).idxmax(),
    })
    children = sessions[sessions["parent"].notna() & sessions["parent"].isin(sessions.index)].copy()
    empty = pd.DataFrame({"src": [], "dst": [], "kind": []}).astype({"src": int, "dst": int})
    if children.empty:
        return empty, empty
    at_turn = recs.assign(pos=pos).drop_duplicates(["session_id", "turn"]).set_index(["session_id", "turn"])["pos"]
    if trace is not None:
        children["spawn_turn"], children["joins"] = zip(*(_from_trace(trace, c) for c in children.index), strict=True)
    else:
        children["spawn_turn"] = _spawn_by_timing(recs, children)
        children["joins"] = True  # checked against timing below
    children = children[children["spawn_turn"].notna()]
    spawn_row = at_turn.reindex(list(zip(children["parent"], children["spawn_turn"], strict=True))).to_numpy()
    join_row = at_turn.reindex(list(zip(children["parent"], children["spawn_turn"] + 1, strict=True))).to_numpy()
    t_sent, t_done = recs["t_sent"].to_numpy(), recs["t_done"].to_numpy()
    has_spawn = ~np.isnan(spawn_row)
    joins = children["joins"].to_numpy(dtype=bool) & ~np.isnan(join_row)
    if trace is None:  # a subagent still running when the parent went on was not joined
        safe = np.where(joins, join_row, 0).astype(int)
        joins &= t_sent[safe] >= t_done[children["last"].to_numpy()] - EPS
    spawns = pd.DataFrame({"src": spawn_row[has_spawn].astype(int), "dst": children["first"].to_numpy()[has_spawn], "kind": "spawn"})
    joined = pd.DataFrame({"src": children["last"].to_numpy()[joins], "dst": join_row[joins].astype(int), "kind": "join"})
    joined["spawn_row"] = spawn_row[joins].astype(int)
    return spawns, joined


def _from_trace(trace: Trace, sid: str) -> tuple[float, bool]:
    child = trace.by_id.get(sid)
    parent = trace.by_id.get(child.parent or "") if child else None
    if parent is None:
        return np.nan, False
    for i, turn in enumerate(parent.turns):
        if sid in turn.spawns:
            return float(i), i + 1 < len(parent.turns)
    return (float(child.fork_turn) if child.fork_turn is not None else np.nan), False


def _spawn_by_timing(recs: pd.DataFrame, children: pd.DataFrame) -> np.ndarray:
    """The parent's last turn that ended before the subagent's first send."""
    left = pd.DataFrame({"parent": children["parent"].to_numpy(), "t": children["first_sent"].to_numpy() + EPS,
                         "child": children.index}).dropna(subset=["t"]).sort_values("t")
    right = recs[["session_id", "turn", "t_done"]].dropna(subset=["t_done"]).sort_values("t_done")
    right = right.rename(columns={"session_id": "parent", "t_done": "t"})
    left["parent"], right["parent"] = left["parent"].astype(str), right["parent"].astype(str)
    merged = pd.merge_asof(left, right, on="t", by="parent", direction="backward")
    return merged.set_index("child")["turn"].reindex(children.index).to_numpy()


TASK_COLUMNS = ["task", "sessions", "requests", "complete", "completion_s", "critical_path_service_s",
                "critical_path_requests", "critical_path_sub_requests", "join_wait_s"]


def task_table(graph: TaskGraph, trace: Trace | None) -> pd.DataFrame:
    recs = graph.recs
    good = (recs["status"] == "ok") & (recs["phase"] == "measure")
    start = recs["t_scheduled"].fillna(recs["t_sent"])
    g = recs.assign(good=good, start=start).groupby("task", sort=False)
    table = pd.DataFrame({
        "sessions": g["session_id"].nunique(),
        "requests": g.size(),
        "complete": g["good"].all(),
        "completion_s": g["t_done"].max() - g["start"].min(),
    })
    if trace is not None:
        expected = {s.id: sum(len(f.turns) for f in trace.family(s.id)) for s in trace.main_sessions}
        table["complete"] &= table["requests"] == table.index.map(expected)
    table = table.join(_walk(graph), how="left").join(_join_waits(graph), how="left")
    table["join_wait_s"] = table["join_wait_s"].fillna(0.0)
    return table.rename_axis("task").reset_index()[TASK_COLUMNS]


def _walk(graph: TaskGraph) -> pd.DataFrame:
    """Service time, length and subagent share of every task's critical path, all tasks at once."""
    recs = graph.recs
    e2el = (recs["t_done"] - recs["t_sent"]).fillna(0.0).to_numpy()
    sub = (recs["agent"] == "sub").to_numpy()
    cur = graph.last_row.to_numpy().astype(np.int64)
    service, length, subs = np.zeros(cur.size), np.zeros(cur.size, dtype=int), np.zeros(cur.size, dtype=int)
    active = cur >= 0
    for _ in range(len(recs)):
        if not active.any():
            break
        rows = cur[active]
        service[active] += e2el[rows]
        length[active] += 1
        subs[active] += sub[rows]
        cur[active] = graph.best_pred[rows]
        active = cur >= 0
    return pd.DataFrame({"critical_path_service_s": service, "critical_path_requests": length,
                         "critical_path_sub_requests": subs}, index=graph.last_row.index)


def _join_waits(graph: TaskGraph) -> pd.DataFrame:
    """Per task, Σ over join turns of how long the parent waited past its spawning turn's end."""
    joins = graph.edges[graph.edges["kind"] == "join"]
    if joins.empty:
        return pd.DataFrame({"join_wait_s": []})
    t_done = graph.recs["t_done"].to_numpy()
    wait = np.maximum(0.0, t_done[joins["src"].to_numpy()] - t_done[joins["spawn_row"].to_numpy(dtype=int)])
    per_join = pd.Series(wait).groupby(joins["dst"].to_numpy()).max()
    tasks = graph.recs["task"].to_numpy()[per_join.index.to_numpy()]
    return per_join.groupby(tasks).sum().to_frame("join_wait_s")


def session_summary(records: pd.DataFrame, ttft: pd.Series, trace: Trace | None) -> tuple[dict, pd.DataFrame, TaskGraph]:
    """Summary dict, the per-task table and the graph. `ttft` is aligned to the measured ok records."""
    graph = task_graph(records, trace)
    tasks = task_table(graph, trace)
    per_session = ttft.groupby(records.loc[ttft.index, "session_id"].to_numpy()).mean()
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
        "session_ttft_mean_s": percentiles(per_session),
    }
    return summary, tasks, graph
