"""A request's deadlines (TTFT, idle, total), enforced by one lazily re-armed timer.

One timer per request, not per chunk: it re-arms only when it fires early. When a deadline
passes it ends the exchange on the wire and closes its connection (`Connection.cancel`), so the
task waiting for the response never sees a cancellation it did not ask for; before the request
has a connection (a wait for a free one, the connect), it cancels the task waiting for it
(`connecting`), as `asyncio.timeout` would, without a second timer per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from harness.driver import clock
from harness.driver.http.wire import Connection
from harness.driver.target import Timeouts

_perf = clock.now


class Watchdog:
    """Ends the exchange once the TTFT, idle or total deadline has passed."""

    __slots__ = (
        "_loop",
        "_handle",
        "t0",
        "last",
        "first",
        "reason",
        "conn",
        "_tm",
        "_waiting",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, t0: float, tm: Timeouts) -> None:
        self._loop, self._tm = loop, tm
        self.t0 = self.last = t0
        self.first = False
        self.reason: str | None = None
        self.conn: Connection | None = None  # the connection the exchange is on
        self._waiting: asyncio.Task | None = None  # the task awaiting a connection
        # Armed for the soonest any deadline can be (the idle one runs from the first token, at
        # the send at the soonest), and re-armed so (`_check`): it may fire early, and re-arms
        # then, but never late, so the first token does not re-arm it (a timer less a request).
        self._handle = loop.call_later(min(tm.ttft, tm.idle, tm.total), self._check)

    def _deadline(self) -> tuple[float, str]:
        d, why = (
            (self.last + self._tm.idle, "IdleTimeout")
            if self.first
            else (self.t0 + self._tm.ttft, "TTFTTimeout")
        )
        total = self.t0 + self._tm.total
        return (total, "TotalTimeout") if total <= d else (d, why)

    async def connecting(self, acquire: Awaitable[Connection]) -> Connection:
        """`acquire`'s connection; TimeoutError if the TTFT or total deadline passes first (the
        timer cancels this task, and only its own cancellation is turned into the timeout, a
        cancellation from outside goes on)."""
        task = self._waiting = asyncio.current_task()
        try:
            return await acquire
        except asyncio.CancelledError:
            if self.reason is not None and task is not None and task.uncancel() == 0:
                raise TimeoutError(f"no connection before the {self.reason}") from None
            raise
        finally:
            self._waiting = None

    def _check(self) -> None:
        deadline, why = self._deadline()
        now = _perf()
        if now < deadline - 1e-4:
            # before the first token, the idle deadline can come as soon as now + idle
            due = deadline if self.first else min(deadline, now + self._tm.idle)
            self._handle = self._loop.call_later(due - now, self._check)
            return
        self.reason = why
        if self._waiting is not None:
            self._waiting.cancel()
        if self.conn is not None:
            self.conn.cancel()

    def started(self) -> None:
        """The first token came: from now the idle deadline holds, or the total one (from the
        send, not from now), whichever comes first; the timer, armed no later than either,
        re-arms for it when it fires."""
        self.first = True

    def cancel(self) -> None:
        self._handle.cancel()
