"""The run's one clock: `time.perf_counter()`, or on a `VirtualLoop` the loop's simulated time.

Every time the driver stamps (sends, chunks, deadlines, the run's origin, progress) is `now()`,
and every wait is the event loop's (`call_later`, `asyncio.sleep`, `asyncio.timeout`), so one
switch moves a whole run onto simulated time: run it on a `VirtualLoop`.

A `VirtualLoop` is asyncio's selector loop with two changes. Its `time()` is a number that only
the loop moves. Its selector polls and never waits while a timer is due: where the loop would
block until the next timer, the clock jumps to that timer instead. So time stands still while
any callback is ready, and when every task waits it jumps to the next event, which is what makes
a simulation exact (nothing depends on the host's speed) and fast (no wall time is slept). With
no timer at all the selector does block: only a signal (Ctrl-C) or another thread can wake the
loop then, and it takes wall time to, as on any loop. Work done in other threads is not on this
clock, so a run on it uses none.

The `looptime` package does the same for tests (a pytest plugin that patches a test's loop);
this loop is the small part of it a run needs, owned here so that a run's clock is a plain loop
that `asyncio.Runner` can make.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
import time
from collections.abc import Callable

# The virtual loop running now, with its thread's id. Looking it up is most of what `now()`
# costs: asyncio's get_running_loop asks the OS for the process id on every call (a system
# call, ~1 us here), and the driver reads its clock several times per request.
_running: tuple[int, VirtualLoop] | None = None


def now() -> float:
    """The run clock's reading: the virtual loop's time on one, else `time.perf_counter()`."""
    running = _running
    if running is not None and running[0] == threading.get_ident():
        return running[1]._now
    return time.perf_counter()


async def sleep(loop: VirtualLoop, delay: float) -> None:
    """`asyncio.sleep(delay)` on `loop`, the running loop, without looking it up (see `now`):
    the same timer, so the same order of events."""
    if delay <= 0:
        await asyncio.sleep(0)
        return
    future = loop.create_future()
    handle = loop.call_later(delay, _wake, future)
    try:
        await future
    finally:
        handle.cancel()


def _wake(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.set_result(None)


def is_virtual() -> bool:
    """Whether the running loop (if any) keeps simulated time."""
    try:
        return isinstance(asyncio.get_running_loop(), VirtualLoop)
    except RuntimeError:
        return False


_POLL_EVERY = 64  # loop turns between two polls of the file descriptors (see select)


class _SkippingSelector(selectors.DefaultSelector):
    """Polls what is ready; a wait with a timeout is skipped, reported to `skip` instead.

    A simulation's loop turns about once per engine step and per request event, and an epoll
    call each turn was a tenth of a run's time. On this loop the descriptors carry only signals
    (the loop's self-pipe) and threads' wake-ups, neither on simulated time (a thread's callback
    is queued whether or not the pipe is read), so they are polled every `_POLL_EVERY`th turn,
    and always before the loop would block."""

    def __init__(self, skip: Callable[[float], None]) -> None:
        super().__init__()
        self._skip = skip
        self._turns = 0

    def select(self, timeout: float | None = None) -> list:
        self._turns += 1
        if timeout is not None and self._turns % _POLL_EVERY:
            if timeout > 0:
                self._skip(timeout)
            return []
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled: only a signal or a thread can wake the loop
            return super().select(None)
        self._skip(timeout)
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time, starting at 0 s (see the module's docstring)."""

    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_SkippingSelector(self._advance))

    def time(self) -> float:
        return self._now

    def run_forever(self) -> None:
        global _running
        outer, _running = _running, (threading.get_ident(), self)
        try:
            super().run_forever()
        finally:
            _running = outer

    def _advance(self, seconds: float) -> None:
        self._now += seconds
