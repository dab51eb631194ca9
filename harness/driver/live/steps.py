"""The phases around a replay, each shown from its first second: the target's start (an engine
loading its model, an endpoint's preflight) with a line of its own, then analysing and writing
the report. A spinner with the seconds so far on a terminal, plain lines in a log."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator

from harness.driver.live.progress import clock, is_terminal


def starting(kind: str | None) -> tuple[str, str]:
    """The start phase of a target by its `describe()` kind: (while, when done)."""
    if kind == "engine-inprocess":
        return "starting the reference engine", "started the reference engine"
    return "checking the endpoints", "checked the endpoints"


@contextlib.contextmanager
def step(
    name: str, show: bool = True, done: str | None = None, after_s: float = 0.0
) -> Iterator[None]:
    """A phase outside the replay ('starting the reference engine', 'analysing'), shown from its
    first second: a spinner with the seconds so far on a terminal, a plain line otherwise. With
    `done` it leaves a line of its own when it ends ('started the reference engine in 28 s');
    without, the spinner goes (a plain log always says how long it took). `after_s`: no line is
    left (nor, in a log, written) for a phase shorter than that, so one that ends (or fails) at
    once adds no line before its result or its one-line error."""
    if not show:
        yield
        return
    t0 = time.perf_counter()
    if is_terminal():
        with _spinner(name):
            yield
        took = time.perf_counter() - t0
        if done and took >= after_s:
            print(f"{done} in {clock(took)}", file=sys.stderr, flush=True)
        return
    said = threading.Event()

    def say() -> None:
        said.set()
        print(f"progress: {name}…", file=sys.stderr, flush=True)

    timer = threading.Timer(after_s, say)
    timer.daemon = True
    if after_s > 0:
        timer.start()
    else:
        say()
    try:
        yield
    finally:
        timer.cancel()
    if said.is_set():
        spent = clock(time.perf_counter() - t0)
        print(f"progress: {name} done ({spent})", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _spinner(name: str) -> Iterator[None]:
    """rich's spinner and elapsed time, refreshed by its own thread: it moves while the event
    loop is busy starting an engine."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(style="cyan"), TextColumn(f"{name}…"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as spinner:
        spinner.add_task(name, total=None)
        yield
