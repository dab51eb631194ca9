"""Several runs on one page: each run against the first (the rule of `harness compare`) and the
throughput-interactivity frontier among them, computed once here for the report to draw."""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.compare.verdict import Judgement, compare_analyses
from harness.analysis.frontier import RunsFrontier, runs_frontier
from harness.analysis.summary_types import Analysis


@dataclass(frozen=True)
class SideBySide:
    against_first: list[Judgement]  # one per run after the first, in the page's order
    frontier: RunsFrontier


def side_by_side(analyses: list[Analysis]) -> SideBySide | None:
    """What a page of several runs shows beside each run's own figures; None for one run."""
    if len(analyses) < 2:
        return None
    first = analyses[:1]
    return SideBySide(
        [compare_analyses(first, [other]) for other in analyses[1:]], runs_frontier(analyses)
    )
