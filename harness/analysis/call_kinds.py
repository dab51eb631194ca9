"""Each request's call kind: where it sits in its task, which decides what its cache can hold.

In order of precedence (summary.json `cache.by_call_kind`, docs/metrics.md):

- `session_first`: a main session's first call (nothing of the session was sent before);
- `subagent_first`: a subagent's first call, forked (it starts with its parent's context) or
  spawned (only the system prompt in common); the mode comes from the trace;
- `after_join`: the call that follows subagents' ends and carries their reports (a join edge of the
  task graph, `analysis.sessions.graph`: from the trace, else inferred from timing);
- `after_long_think`: a call sent more than `long_think_s` after its session's previous call ended
  (the idle gap the server saw, measured; a cache with a TTL can lose the prefix in it);
- `steady`: every other call.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.sessions.graph import TaskGraph
from harness.trace.cycles import split_cycled_id
from harness.trace.model import Trace

CALL_KINDS = ("session_first", "subagent_first", "after_join", "after_long_think", "steady")
LONG_THINK_S = 60.0  # an idle gap longer than a tool call's: a person's break, a long reasoning


def call_kinds(
    records: pd.DataFrame, graph: TaskGraph, long_think_s: float = LONG_THINK_S
) -> pd.Series:
    """Per record (aligned to `records`), its call kind."""
    recs = graph.recs
    edges = graph.edges
    n = len(recs)
    joined = np.zeros(n, dtype=bool)
    joined[edges.loc[edges["kind"] == "join", "dst"].to_numpy(dtype=np.int64)] = True
    gap = np.full(n, np.nan)
    turn = edges[edges["kind"] == "turn"]
    src, dst = turn["src"].to_numpy(dtype=np.int64), turn["dst"].to_numpy(dtype=np.int64)
    gap[dst] = recs["t_sent"].to_numpy(dtype=float)[dst] - recs["t_done"].to_numpy(dtype=float)[src]
    first = recs["turn"].to_numpy(dtype=float) == 0
    sub = recs["agent"].to_numpy() != "main"
    kind = np.select(
        [first & ~sub, first & sub, joined, gap > long_think_s],
        list(CALL_KINDS[:4]),
        default="steady",
    )
    by_id = pd.Series(kind, index=recs["request_id"].to_numpy())
    by_id = by_id[~by_id.index.duplicated(keep="last")]
    return pd.Series(
        by_id.reindex(records["request_id"].to_numpy()).to_numpy(), index=records.index
    )


def subagent_modes(records: pd.DataFrame, trace: Trace | None) -> pd.Series:
    """Per record: its session's subagent mode (`fork`, `spawn`), None for a main session or
    when the run has no trace to say."""
    if trace is None:
        return pd.Series(None, index=records.index, dtype=object)
    modes = {}
    for sid in pd.unique(records["session_id"]):
        s = trace.by_id.get(split_cycled_id(sid)[0])
        modes[sid] = s.mode if s is not None else None
    return records["session_id"].map(modes)
