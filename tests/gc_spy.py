"""A spy for the tests that check the cyclic GC's young threshold while a phase of a run works."""

from __future__ import annotations

import gc
import inspect


def note_threshold(monkeypatch, owner, name: str, seen: list[int]) -> None:
    """`owner.name` (a function, or a class's method; plain or async) notes the collector's
    young threshold in `seen` each time it is called, then does its work."""
    work = getattr(owner, name)
    if inspect.iscoroutinefunction(work):

        async def spy(*args, **kwargs):
            seen.append(gc.get_threshold()[0])
            return await work(*args, **kwargs)

    else:

        def spy(*args, **kwargs):
            seen.append(gc.get_threshold()[0])
            return work(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
