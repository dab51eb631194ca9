"""Replaying a trace more than once in one run: each pass (cycle) is fresh content.

A closed loop that holds its concurrency for the whole run draws the trace's main sessions again
when they run out. Cycle c > 0 prefixes every prompt with its own salt (`cycle_salt`), so its
tasks share no prefix with earlier cycles' (the salt segment starts every prompt), and names its
sessions `<id>@c<c>` (`cycled_id`), so records, tasks and request ids stay unique. Cycle 0 is the
trace as it is: a run that never cycles is unchanged. The analyzer maps a record back to its
trace session and salt with `split_cycled_id` and `cycle_salt`.
"""

from __future__ import annotations

import re

_CYCLED = re.compile(r"^(?P<id>.+)@c(?P<cycle>[1-9][0-9]*)$")


def cycled_id(session_id: str, cycle: int) -> str:
    return session_id if cycle == 0 else f"{session_id}@c{cycle}"


def split_cycled_id(session_id: str) -> tuple[str, int]:
    """(trace session id, cycle) of a record's session id."""
    m = _CYCLED.match(session_id)
    return (m["id"], int(m["cycle"])) if m else (session_id, 0)


def cycle_salt(salt: str | None, cycle: int) -> str | None:
    """The run's salt for cycle 0; a salt of its own for every later cycle."""
    if cycle == 0:
        return salt
    return f"{salt}/cycle{cycle}" if salt else f"cycle{cycle}"
