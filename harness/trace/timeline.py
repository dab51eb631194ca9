"""Estimated send times of a trace's requests, ignoring service time.

A session's turn is sent at its arrival plus the think times so far; subagents start when the
parent's spawning turn is sent, and the parent's next turn goes its think time after the spawning
turn or when its subagents' last turns have been sent (a join), whichever is later. Ties keep family order: a parent's turn, then the subagents it spawns,
then the parent's next turn. Stats and the Mooncake export process requests in this order.

`prompt_steps` yields each prompt in that order as segments; a turn that extends its session's
previous prompt yields only what it appends, so a walk over a 142k-token, 100-turn session stays
linear instead of quadratic.
"""

from __future__ import annotations

from collections.abc import Iterator

from harness.trace.content import Content, Segment
from harness.trace.model import Session, Trace


def _walk(trace: Trace, s: Session, start: float, out: list[tuple[float, int, str, int]]) -> float:
    """Appends (time, order, session id, turn) for a session and its subagents; returns its end."""
    t, joined = start, start
    for k, turn in enumerate(s.turns):
        t = max(t + turn.think_s, joined)  # a join's think time runs beside its subagents
        out.append((t, len(out), s.id, k))
        joined = t
        for child_id in turn.spawns:
            child = trace.session(child_id)
            joined = max(joined, _walk(trace, child, t, out))
    return joined


def send_order(trace: Trace) -> list[tuple[float, str, int]]:
    """`(estimated send time, session id, turn)` for every request, in send order."""
    out: list[tuple[float, int, str, int]] = []
    spawned = {c for s in trace.sessions for t in s.turns for c in t.spawns}
    for s in trace.sessions:
        # Subagents nobody lists in `spawns` start at their own arrival time.
        if s.parent is None or s.id not in spawned:
            _walk(trace, s, s.arrival_s, out)
    out.sort()
    return [(t, sid, k) for t, _, sid, k in out]


def prompt_steps(
    trace: Trace, content: Content
) -> Iterator[tuple[float, str, int, bool, list[Segment]]]:
    """`(send time, session id, turn, extends, segments)` in send order.

    When `extends` is true, `segments` are what the turn appends to the same session's previous
    prompt (already yielded); otherwise they are the whole prompt.
    """
    for t, sid, k in send_order(trace):
        if content.appends_to_previous(sid, k):
            yield t, sid, k, True, content.new_segments(sid, k)
        else:
            yield t, sid, k, False, content.segments(sid, k)
