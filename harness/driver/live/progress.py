"""Progress of a replay: a bar with elapsed / planned time (or requests of the total), an ETA and
the phase (warm-up, measuring, cool-down, draining: what it waits for). The phases around it
(the target's start, analysing, writing the report) are live/steps.py's.

On a terminal it is a rich bar on stderr, its counters fitted to the terminal's width (fields
dropped whole, lowest priority first); when stderr is not a terminal (a `2>&1 | tee` log, CI) it
is a plain line at once and every `PLAIN_EVERY_S` seconds with the same ETA. Off with --quiet.
It only reads counters, so it costs the driver one small render every half second.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass

from harness.driver import clock as run_clock
from harness.driver.live.stats import ReplayStats

REFRESH_S = 0.5
PLAIN_EVERY_S = 10.0


@dataclass(frozen=True)
class Plan:
    """What the run is meant to do, for the bar's total and its ETA: a time limit, else a request
    count (max_requests, or one pass over the trace); neither for an open-ended run."""

    duration_s: float | None = None
    requests: int | None = None
    warmup_s: float = 0.0
    cooldown_s: float = 0.0
    drain_s: float = 0.0

    @classmethod
    def of(cls, config, trace) -> Plan:
        one_pass = sum(len(s.turns) for s in trace.sessions)
        cycled = config.load == "closed" and config.cycle_trace and config.max_duration
        requests = config.max_requests or (None if cycled else one_pass)
        return cls(
            duration_s=config.max_duration,
            requests=requests,
            warmup_s=config.warmup_s,
            cooldown_s=config.cooldown_s,
            drain_s=config.drain_s if config.max_duration else 0.0,
        )


def wanted(quiet: bool) -> bool:
    """Progress is shown unless --quiet: a bar on a terminal, plain lines otherwise."""
    return not quiet


def phase(plan: Plan, elapsed: float, stats: ReplayStats, sending_stopped: bool) -> str:
    if sending_stopped or (plan.duration_s is not None and elapsed >= plan.duration_s):
        return "draining"
    if elapsed < plan.warmup_s:
        return "warm-up"
    if (
        plan.duration_s is not None
        and plan.cooldown_s
        and elapsed >= plan.duration_s - plan.cooldown_s
    ):
        return "cool-down"
    return "measuring"


def fraction(plan: Plan, elapsed: float, stats: ReplayStats) -> float | None:
    """How far along the plan is, 0..1; None when the run has no planned end."""
    shares = []
    if plan.duration_s:
        shares.append(elapsed / plan.duration_s)
    if plan.requests:
        shares.append(stats.done / plan.requests)
    return min(1.0, max(shares)) if shares else None


def eta_s(plan: Plan, elapsed: float, stats: ReplayStats) -> float | None:
    """Seconds left: to the time limit, or at the rate so far to the request total."""
    left = []
    if plan.duration_s is not None:
        left.append(max(0.0, plan.duration_s - elapsed))
    if plan.requests and stats.done:
        left.append(max(0, plan.requests - stats.done) * elapsed / stats.done)
    return min(left) if left else None


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{s} s"


def counters(stats: ReplayStats, elapsed: float) -> str:
    ttft = statistics.median(stats.recent_ttft) * 1000 if stats.recent_ttft else None
    rate = stats.output_tokens / elapsed if elapsed > 0 else 0.0
    recent = f"TTFT p50 {ttft:.0f} ms (recent)" if ttft is not None else "no first token yet"
    return (
        f"requests {stats.done} done, {stats.failed} failed, {stats.cancelled} cancelled"
        f" | in flight {stats.in_flight} | sessions {stats.active_sessions}"
        f" | {rate:,.0f} tok/s | {recent}"
    )


def brief(stats: ReplayStats, elapsed: float, width: int = 80) -> str:
    """The counters for the bar's line in at most `width` columns: whole fields in priority
    order (requests done, failures, in flight, output rate, recent TTFT), the lowest dropped
    first, never one cut mid-word."""
    ttft = statistics.median(stats.recent_ttft) * 1000 if stats.recent_ttft else None
    rate = stats.output_tokens / elapsed if elapsed > 0 else 0.0
    fields = [
        f"{stats.done:,} done",
        f"{stats.failed:,} failed" if stats.failed else "",
        f"{stats.in_flight} in flight",
        f"{rate:,.0f} tok/s",
        f"TTFT {ttft:.0f} ms" if ttft is not None else "",
    ]
    shown: list[str] = []
    for field in (f for f in fields if f):
        if len(", ".join([*shown, field])) > width:
            break
        shown.append(field)
    return ", ".join(shown)


def of_plan(plan: Plan, elapsed: float, stats: ReplayStats) -> str:
    """'41 s of 90 s' / '387 of 1,200 requests' / '41 s' (no planned end)."""
    if plan.duration_s is not None:
        return f"{clock(elapsed)} of {clock(plan.duration_s)}"
    if plan.requests:
        return f"{stats.done:,} of {plan.requests:,} requests, {clock(elapsed)}"
    return clock(elapsed)


def waiting(plan: Plan, elapsed: float, stats: ReplayStats) -> str:
    """What draining waits for: the requests still in flight, and how long it may take."""
    if not stats.in_flight:
        return "nothing left in flight"
    what = f"waiting for {stats.in_flight} request{'s' if stats.in_flight != 1 else ''} in flight"
    if plan.duration_s is not None and plan.drain_s:
        left = max(0.0, plan.duration_s + plan.drain_s - elapsed)
        return f"{what}, at most {clock(left)} more"
    return what


def where(plan: Plan, elapsed: float, stats: ReplayStats, sending_stopped: bool) -> str:
    """The middle of the line: where in the plan and the ETA, or while draining what it waits for."""
    if phase(plan, elapsed, stats, sending_stopped) == "draining":
        return waiting(plan, elapsed, stats)
    done = fraction(plan, elapsed, stats)
    share = f" ({100 * done:.0f}%)" if done is not None else ""
    left = eta_s(plan, elapsed, stats)
    return of_plan(plan, elapsed, stats) + share + ("" if left is None else f", ETA {clock(left)}")


def render(
    stats: ReplayStats, elapsed: float, plan: Plan | None = None, sending_stopped: bool = False
) -> str:
    """The plain line: phase, where in the plan and the ETA (or what draining waits for), then
    the counters."""
    plan = plan or Plan()
    head = f"{phase(plan, elapsed, stats, sending_stopped)}: {where(plan, elapsed, stats, sending_stopped)}"
    return f"{head} | {counters(stats, elapsed)}"


def is_terminal() -> bool:
    return sys.stderr.isatty()


async def show(
    stats: ReplayStats, plan: Plan | None = None, stopped: Callable[[], bool] = lambda: False
) -> None:
    """Refresh until cancelled: a bar on a terminal, a plain line every PLAIN_EVERY_S otherwise."""
    plan = plan or Plan()
    t0 = run_clock.now()
    if not is_terminal():
        await _plain(stats, plan, stopped, t0)
        return
    await _bar(stats, plan, stopped, t0)


async def _plain(stats: ReplayStats, plan: Plan, stopped: Callable[[], bool], t0: float) -> None:
    """A line at once, then one every PLAIN_EVERY_S, and one at the end."""
    try:
        while True:
            line = render(stats, run_clock.now() - t0, plan, stopped())
            print(f"progress: {line}", file=sys.stderr, flush=True)
            await asyncio.sleep(PLAIN_EVERY_S)
    finally:
        line = render(stats, run_clock.now() - t0, plan, stopped())
        print(f"progress: {line}", file=sys.stderr, flush=True)


PHASE_W = 10  # "measuring", "cool-down", "draining"


def _bar_width(columns: int) -> int:
    return 20 if columns >= 110 else 12


def _columns(columns: int):
    """Phase, bar, where and counters; the counters are fitted to what the rest leaves
    (`brief`), so nothing is cut mid-word. The bar in a neutral colour: red says error."""
    from rich.progress import BarColumn, TextColumn
    from rich.table import Column

    def kept(width: int = 0) -> Column:
        return Column(no_wrap=True, min_width=width)

    return (
        TextColumn("{task.fields[phase]}", table_column=kept(PHASE_W)),
        BarColumn(
            bar_width=_bar_width(columns),
            style="bar.back",
            complete_style="cyan",
            finished_style="cyan",
            pulse_style="cyan",
        ),
        TextColumn("{task.fields[where]}", table_column=kept()),
        TextColumn("[dim]{task.fields[counts]}", table_column=kept()),
    )


async def _bar(stats: ReplayStats, plan: Plan, stopped: Callable[[], bool], t0: float) -> None:
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    with Progress(*_columns(console.width), console=console, auto_refresh=False) as bar:
        task = bar.add_task("replay", total=1.0, phase="", where="", counts="")

        def update() -> None:
            elapsed, halted = run_clock.now() - t0, stopped()
            done = fraction(plan, elapsed, stats)
            middle = where(plan, elapsed, stats, halted)
            room = console.width - PHASE_W - _bar_width(console.width) - len(middle) - 4
            bar.update(
                task,
                completed=done if done is not None else 0.0,
                total=1.0 if done is not None else None,
                phase=phase(plan, elapsed, stats, halted),
                where=middle,
                counts=brief(stats, elapsed, max(room, 0)),
            )
            bar.refresh()

        try:
            while True:
                update()
                await asyncio.sleep(REFRESH_S)
        finally:
            update()
