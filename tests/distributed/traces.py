"""The small traces of the distributed tests (no Ray needed to import this)."""

from __future__ import annotations

from harness.trace.model import Trace
from tests.driver.helpers import sess, trace


def small_trace(mains: int = 10, turns: int = 3, output: int = 6) -> Trace:
    """Mains of `turns` turns; every third spawns two forked subagents after its first turn."""
    sessions = []
    for i in range(mains):
        kids = (f"m{i}.s0", f"m{i}.s1") if i % 3 == 0 else ()
        body = [(40, output, 0.0, kids)] + [(20, output, 0.01)] * (turns - 1)
        sessions.append(sess(f"m{i}", body))
        for kid in kids:
            sessions.append(
                sess(kid, [(30, 5, 0.0), (10, 5, 0.01)], parent=f"m{i}", fork_turn=0, mode="fork")
            )
    return trace(*sessions)
