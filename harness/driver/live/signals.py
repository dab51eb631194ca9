"""SIGINT and SIGTERM while a run's event loop runs: the first ends the phase at once, a second
gives up the clean-up.

The first signal: a replay that is sending stops and cancels what is in flight (recorded
`cancelled`); any other phase (starting servers, a /metrics scrape, the preflight) is cancelled
where it waits, and the run ends with `Interrupted` (exit 130) once its folder is closed.
Outside the loop (building the trace, the analysis) `interrupt_on_signals` makes SIGTERM a
Ctrl-C too. `Signals.name` says which came ("SIGINT", "SIGTERM").
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Protocol

_active: ContextVar[Signals | None] = ContextVar("harness_signals", default=None)


class Interrupted(KeyboardInterrupt):
    """A signal ended the work (the CLI exits 130); `str()` is the signal's name."""


class Interruptible(Protocol):
    interrupted: bool

    @property
    def running(self) -> bool:  # sending: a signal interrupts it (else the waiting is cancelled)
        ...

    def interrupt(self) -> None: ...

    def stop(self, reason: str) -> None: ...


class Signals:
    """The run's signal handlers, installed once per event loop run (`installed()`)."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.replay: Interruptible | None = None
        self.noted: list[Callable[[str], None]] = []  # told the first signal's name
        self._task: asyncio.Task | None = None
        self._cancelled = False

    @staticmethod
    def current() -> Signals | None:
        return _active.get()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Signals]:
        """Handlers for the block (the current task's); a signal that cancelled the block comes
        out of it as `KeyboardInterrupt`."""
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass
        token = _active.set(self)
        try:
            yield self
        except asyncio.CancelledError:
            if not self._cancelled or self._task is None:
                raise
            self._task.uncancel()
            raise Interrupted(self.name) from None
        finally:
            _active.reset(token)
            for sig in installed:
                loop.remove_signal_handler(sig)

    @contextlib.contextmanager
    def watching(self, replay: Interruptible) -> Iterator[None]:
        """While the block runs, the first signal goes to `replay` whenever it is sending."""
        before, self.replay = self.replay, replay
        try:
            yield
        finally:
            self.replay = before

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.name is not None:
            raise Interrupted(sig.name)  # the second: give up the clean-up at once
        self.name = sig.name
        for note in self.noted:
            note(sig.name)
        if self.replay is not None and self.replay.running:
            self.replay.interrupt()
        elif self._task is not None:
            self._cancelled = True
            self._task.cancel()


def _interrupt(signum: int, frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` in the block (synchronous code, the main thread)."""
    try:
        before = [(s, signal.signal(s, _interrupt)) for s in (signal.SIGINT, signal.SIGTERM)]
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in before:
            signal.signal(sig, handler)
