"""The Pareto frontier of runs or sweep points: throughput against interactivity."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.compare.comparable import not_comparable
from harness.analysis.summary_types import Analysis


def pareto_frontier(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (both maximized),
    ordered by the first coordinate: InferenceX's throughput-vs-interactivity frontier."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    frontier, best = [], -np.inf
    for i in order:
        if points[i][1] > best:
            frontier.append(i)
            best = points[i][1]
    return sorted(frontier, key=lambda i: points[i][0])


@dataclass(frozen=True)
class RunsFrontier:
    """Runs as points of P90 interactivity (x) and TPGS (y), and those on their frontier."""

    points: list[tuple[str, float, float]]  # (run, interactivity, tpgs): the runs that have both
    on_frontier: list[int]  # indices into points, by interactivity; empty when `why_not`
    why_not: str | None  # why no frontier: the runs did not measure the same thing


def runs_frontier(analyses: list[Analysis]) -> RunsFrontier:
    """The frontier among runs that measured the same thing (same trace, load and definitions)."""
    points = [
        (a.run.name, float(x), float(y))
        for a in analyses
        if (x := a.summary["interactivity_p90"]) is not None
        and (y := a.summary["tpgs"]) is not None
    ]
    why_not = not_comparable(analyses[:1], analyses[1:]).get("tpgs")
    if why_not is not None:
        return RunsFrontier(points, [], why_not)
    return RunsFrontier(points, pareto_frontier([(x, y) for _, x, y in points]), None)
