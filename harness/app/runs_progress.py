"""The progress of a verb that runs run after run (`harness gate`, `harness capacity`): runs done
of the most its rule and budget allow, an ETA from the runs so far, and the interim evidence.

Each finished run is one plain line on stdout (a log, CI), e.g. `gate: 4 of at most 20 runs,
~6.2 min left at 47 s a run: b2: complete in 45 s ...; so far: inconclusive, smallest change
visible tpot_p50 ±26%, tpgs ±18%, about 3 more runs a side`. On a terminal a bar on stderr counts
the runs and the time while a run goes (`harness run`'s look); off with --quiet.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunsProgress:
    verb: str  # "gate", "capacity"
    most: int | None  # runs the rule allows at most (None: only the budget bounds them)
    budget_min: float | None = None  # no run starts past this many minutes
    say: Callable[[str], None] = print
    bar: bool = field(default_factory=lambda: sys.stderr.isatty())
    walls: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    _live: Any = None
    _task: Any = None

    def __enter__(self) -> RunsProgress:
        if self.bar:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._live = Progress(
                "[bold]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                "runs",
                TimeElapsedColumn(),
                "{task.fields[eta]}",
                console=Console(stderr=True),
                transient=True,
            )
            self._live.start()
            self._task = self._live.add_task(self.verb, total=self.most, eta="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    @property
    def left(self) -> int | None:
        """Runs the budget and the rule still allow, at the runs' mean wall time (None: no bound
        known yet)."""
        rule_left = None if self.most is None else max(0, self.most - len(self.walls))
        if self.budget_min is None or not self.walls:
            return rule_left
        spent = (time.perf_counter() - self.started) / 60
        mean_min = sum(self.walls) / len(self.walls) / 60
        budget_left = max(0, int((self.budget_min - spent) // max(mean_min, 1e-9)))
        return budget_left if rule_left is None else min(rule_left, budget_left)

    def eta_s(self) -> float | None:
        """At most this many seconds left: the runs still allowed at the runs' mean wall time."""
        if not self.walls or self.left is None:
            return None
        return self.left * sum(self.walls) / len(self.walls)

    def done(self, line: str, wall_s: float, interim: str | None = None) -> None:
        """A run ended: its line, with the count, the ETA and (when judged) the evidence so far."""
        self.walls.append(wall_s)
        self.say(f"{self._where()}: {line}" + (f"; so far: {interim}" if interim else ""))
        if self._live is not None:
            eta, left = self.eta_s(), self.left
            self._live.update(
                self._task,
                completed=len(self.walls),
                total=None if left is None else len(self.walls) + left,
                eta=f"ETA ≤ {eta / 60:.1f} min" if eta else "",
            )

    def _where(self) -> str:
        """'gate: 4 of at most 20 runs, at most ~6.2 min left at 47 s a run'."""
        n, left, eta = len(self.walls), self.left, self.eta_s()
        mean = sum(self.walls) / n
        if left is None:
            return f"{self.verb}: run {n}, {mean:.0f} s a run, no end known"
        when = f"at most ~{eta / 60:.1f} min left at {mean:.0f} s a run" if eta else "done"
        return f"{self.verb}: {n} of at most {n + left} runs, {when}"


def interim_words(judgement: Any | None, needed_unit: str = "run(s) a side") -> str | None:
    """A verdict so far in words: the verdict, the smallest change visible, runs likely needed."""
    if judgement is None:
        return None
    words = [str(judgement.verdict)]
    seen = getattr(judgement, "smallest_detectable", None) or {}
    if seen:
        words.append(
            "smallest change visible " + ", ".join(f"{k} ±{v:.0%}" for k, v in seen.items())
        )
    needed = getattr(judgement, "runs_needed", None)
    if needed:
        words.append(f"about {needed} more {needed_unit} likely needed")
    nights = getattr(judgement, "nights_needed", None)
    if nights:
        words.append(f"about {nights} more night(s) likely needed")
    return ", ".join(words)
