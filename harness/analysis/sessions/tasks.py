"""Session roll-ups: task completion time, critical path through forks and joins, join waits.

Built on the request graph of `session_graph`: the critical path walks back from a task's last
request, each step to the predecessor that finished last (all tasks at once, column-wise).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.metrics import percentiles
from harness.analysis.sessions.graph import TaskGraph, task_graph, task_roots
from harness.trace.cycles import split_cycled_id
from harness.trace.model import Trace

__all__ = ["TaskGraph", "session_summary", "task_graph", "task_roots", "task_table"]


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
]


def task_table(graph: TaskGraph, trace: Trace | None) -> pd.DataFrame:
    recs = graph.recs
    # A task counts when every request is ok and its last one ended in the measurement phase:
    # one that started during warm-up still counts (in a closed loop every first task does).
    ok = recs["status"] == "ok"
    start = recs["t_scheduled"].fillna(recs["t_sent"])
    g = recs.assign(ok=ok, start=start).groupby(graph.task_code, sort=False)
    last_phase = recs["phase"].to_numpy()[graph.last_row.to_numpy()]
    table = pd.DataFrame(
        {
            "task": g["task"].first(),
            "sessions": g["session_code"].nunique(),
            "requests": g.size(),
            "complete": g["ok"].all(),
            "completion_s": g["t_done"].max() - g["start"].min(),
        }
    )
    table = table.set_index("task")
    table["complete"] &= (
        pd.Series(last_phase == "measure", index=graph.last_row.index)
        .reindex(table.index)
        .to_numpy()
    )
    if trace is not None:
        expected = {
            s.id: sum(len(f.turns) for f in trace.family(s.id)) for s in trace.main_sessions
        }
        # a later cycle's task (harness.trace.cycles) has its trace session's turns
        wanted = table.index.map(lambda t: expected.get(split_cycled_id(t)[0])).to_numpy(
            dtype=float
        )
        table["complete"] &= np.isnan(wanted) | (table["requests"].to_numpy() == wanted)
    table = table.join(_walk(graph), how="left").join(_join_waits(graph), how="left")
    table["join_wait_s"] = table["join_wait_s"].fillna(0.0)
    return table.rename_axis("task").reset_index()[TASK_COLUMNS]


def _walk(graph: TaskGraph) -> pd.DataFrame:
    """Service time, length and subagent share of every task's critical path, all tasks at once."""
    recs = graph.recs
    e2el = (recs["t_done"] - recs["t_sent"]).fillna(0.0).to_numpy()
    sub = (recs["agent"] == "sub").to_numpy()
    cur = graph.last_row.to_numpy().astype(np.int64)
    service, length, subs = (
        np.zeros(cur.size),
        np.zeros(cur.size, dtype=int),
        np.zeros(cur.size, dtype=int),
    )
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
    return pd.DataFrame(
        {
            "critical_path_service_s": service,
            "critical_path_requests": length,
            "critical_path_sub_requests": subs,
        },
        index=graph.last_row.index,
    )


def _join_waits(graph: TaskGraph) -> pd.DataFrame:
    """Per task, Σ over join turns of how long the parent waited past its spawning turn's end."""
    joins = graph.edges[graph.edges["kind"] == "join"]
    if joins.empty:
        return pd.DataFrame({"join_wait_s": []})
    t_done = graph.recs["t_done"].to_numpy()
    wait = np.maximum(
        0.0, t_done[joins["src"].to_numpy()] - t_done[joins["spawn_row"].to_numpy(dtype=int)]
    )
    per_join = pd.Series(wait).groupby(joins["dst"].to_numpy()).max()
    tasks = graph.recs["task"].to_numpy()[per_join.index.to_numpy()]
    return per_join.groupby(tasks).sum().to_frame("join_wait_s")


def session_summary(
    records: pd.DataFrame, ttft: pd.Series, trace: Trace | None
) -> tuple[dict, pd.DataFrame, TaskGraph]:
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
