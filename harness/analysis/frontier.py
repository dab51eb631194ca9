"""The Pareto frontier of runs or sweep points: throughput against interactivity."""

from __future__ import annotations

import numpy as np


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
