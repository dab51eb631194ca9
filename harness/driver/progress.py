"""The live progress line on a terminal: requests done/failed, in flight, throughput, recent TTFT.

Off when stderr is not a TTY or with --quiet; it only reads counters, so it costs the driver
one small render every half second.
"""

from __future__ import annotations

import asyncio
import statistics
import sys

from harness.driver import clock
from harness.driver.stats import ReplayStats

REFRESH_S = 0.5


def wanted(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def render(stats: ReplayStats, elapsed: float) -> str:
    ttft = statistics.median(stats.recent_ttft) * 1000 if stats.recent_ttft else float("nan")
    rate = stats.output_tokens / elapsed if elapsed > 0 else 0.0
    return (
        f"{elapsed:7.1f}s  requests {stats.done} done, {stats.failed} failed, {stats.cancelled} cancelled"
        f" | in flight {stats.in_flight} | sessions {stats.active_sessions}"
        f" | {rate:,.0f} tok/s | TTFT p50 {ttft:.0f} ms (recent)"
    )


async def show(stats: ReplayStats) -> None:
    """Refresh until cancelled."""
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    t0 = clock.now()
    console = Console(stderr=True)
    with Live(console=console, auto_refresh=False, transient=False) as live:
        try:
            while True:
                live.update(Text(render(stats, clock.now() - t0)), refresh=True)
                await asyncio.sleep(REFRESH_S)
        finally:
            live.update(Text(render(stats, clock.now() - t0)), refresh=True)
