"""A capacity search's points read together: the capacity, its band, the SLO that binds, and
points that contradict a curve falling with load (non-monotone).

The capacity is the largest met point with no failing (missed or mixed) point below it; the band
runs from it to the lowest missed point above the highest met one, so a point met above a failing
one widens the band instead of being assumed away. The binding SLO is read at the first failing
point above the capacity: the SLO missed by most of its runs (then the one furthest past its bound).
"""

from __future__ import annotations

from harness.analysis.capacity import FAILING, MET, MISSED, UNDECIDED, PointVerdict, Spread, margin
from harness.analysis.slo import Slo

Points = dict[int, PointVerdict]


def bracket(points: Points) -> tuple[int, int | None]:
    """(good, bad): the capacity so far, and the first point above it that is not met (an
    undecided point below every met one is passed over: too few tasks at low load)."""
    good, bad = 0, None
    for c in sorted(points):
        state = points[c].state
        if state == MET:
            good = c
        elif state in FAILING or (state == UNDECIDED and good):
            bad = c
            break
    return good, bad


def band(points: Points) -> tuple[int, int | None]:
    """(capacity, the lowest missed point above the highest met one; None: none tried)."""
    good, _ = bracket(points)
    top = max((c for c, p in points.items() if p.state == MET), default=0)
    above = [c for c in sorted(points) if c > top and points[c].state == MISSED]
    return good, (above[0] if above else None)


def non_monotone(points: Points) -> list[tuple[int, int]]:
    """(lower, higher) pairs: a failing point below a met one."""
    order = sorted(points)
    return [
        (lo, hi)
        for i, lo in enumerate(order)
        if points[lo].state in FAILING
        for hi in order[i + 1 :]
        if points[hi].state == MET
    ]


def first_failing(points: Points) -> PointVerdict | None:
    good, _ = bracket(points)
    above = [p for c, p in sorted(points.items()) if c > good and p.state in FAILING]
    return above[0] if above else None


def binding(points: Points, slos: list[Slo]) -> dict | None:
    """The SLO that binds at the first failing point: its name, mean value over the point's
    deciding runs, bound, and how many of them missed it."""
    point = first_failing(points)
    if point is None:
        return None

    def badness(slo: Slo) -> tuple[int, float]:
        spread = point.slos[slo.name]
        return spread.missed_runs, -margin(slo, spread.mean) if spread.mean is not None else 0.0

    slo = max(slos, key=badness)
    spread: Spread = point.slos[slo.name]
    return {
        "concurrency": point.concurrency,
        "slo": slo.name,
        "metric": slo.metric,
        "percentile": slo.percentile,
        "value": spread.mean,
        "values": spread.values,
        "interval": spread.interval,
        "bound": slo.bound,
        "upper": slo.is_upper,
        "missed_runs": spread.missed_runs,
        "runs": point.decided_runs,
        "state": point.state,
    }
