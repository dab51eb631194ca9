"""`harness capacity SCENARIO`: the most concurrent tasks the target serves within the SLOs.

The search runs the scenario at `load.concurrency` 1, 2, 4, ... until a point misses an SLO, then
bisects between the last point that met every SLO and the first that missed one. Each SLO of the
scenario (`slos:`, percentile ones such as `ttft_p90: 1s`) is judged with the noise-aware test
`harness compare` uses: the bootstrap interval over tasks of the run's figure (`analysis.compare.
evidence`). Met: the whole interval is within the bound; missed: the whole interval is past it;
otherwise undecided, and the point is run once more and judged on both runs pooled (repeats
drawn too); still undecided, the point value decides and the point says so. `capacity.json`
holds the answer and every point tried, each point's run folder beside it; `capacity.html`
the curve per SLO and why the first failing point failed (harness/report/capacity.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from harness.analysis.compare import evidence
from harness.analysis.compare.evidence import Clusters
from harness.analysis.run import load_run
from harness.analysis.slo import Slo, parse_slos
from harness.analysis.summary import Analysis, analyze
from harness.errors import InputError
from harness.report.capacity import write_capacity_report
from harness.scenario import Scenario

CAPACITY_FILE = "capacity.json"
ALPHA = 0.05  # each SLO's interval is a 95 % one


@dataclass
class SloFigure:
    value: float | None  # the figure over the point's runs pooled
    interval: tuple[float, float] | None
    bound: float
    upper: bool  # the bound is an upper one (latencies); else a lower one (interactivity)
    met: bool | None  # None: undecided by the interval (the point value then decides)

    def within(self, x: float) -> bool:
        return x <= self.bound if self.upper else x >= self.bound


@dataclass
class Point:
    concurrency: int
    runs: list[str]
    met: bool
    decided_by: str  # "interval" or "point value" (still undecided after the repeat)
    slos: dict[str, SloFigure] = field(default_factory=dict)


def judge(analyses: list[Analysis], slo: Slo) -> SloFigure:
    column = "tpot" if slo.metric == "interactivity" else slo.metric
    q = slo.percentile or 50.0
    stat = (
        evidence.inverse_percentile(q) if slo.metric == "interactivity" else evidence.percentile(q)
    )
    runs = [
        Clusters.of(a.per_request[column], a.run.records.loc[a.per_request.index, "task"])
        for a in analyses
    ]
    value = evidence.value(runs, stat)
    figure = SloFigure(value, None, slo.bound, slo.is_upper, None)
    boot = evidence.replicates(runs, stat, evidence.rng())
    boot = boot[np.isfinite(boot)]
    if value is None or boot.size < 0.9 * evidence.REPLICATES:
        figure.met = None if value is not None else False  # no figure at all: not met
        return figure
    lo, hi = (float(x) for x in np.percentile(boot, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)]))
    figure.interval = (lo, hi)
    if figure.within(lo) == figure.within(hi):  # the whole interval on one side of the bound
        figure.met = figure.within(lo)
    return figure


def capacity(
    scenario: Scenario,
    out: Path,
    *,
    max_concurrency: int = 256,
    resolution: float = 0.05,
    quiet: bool = False,
) -> dict:
    slos = [s for s in parse_slos(scenario.slos, source="slos") if s.percentile is not None]
    if not slos:
        raise InputError("capacity needs percentile SLOs, e.g. slos: {ttft_p90: 1s}", field="slos")
    if scenario.load.load != "closed":
        raise InputError("capacity searches a closed loop's concurrency", field="load.mode")
    tried: dict[int, Point] = {}
    met = _search(
        lambda c: _point(scenario, out, c, slos, tried, quiet).met, max_concurrency, resolution
    )
    result = {
        "capacity": met,
        "slos": {s.name: s.bound for s in slos},
        "points": [asdict(tried[c]) for c in sorted(tried)],
    }
    (out / CAPACITY_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_capacity_report(result, out)
    return result


def _search(meets, ceiling: int, resolution: float = 0.05) -> int:
    """The largest concurrency that meets (doubling from 1, then bisection); 0 if 1 does not.
    The bisection stops once the gap to the first miss is within `resolution` of the answer:
    finer than the run-to-run noise, it would only spend runs."""
    good, bad = 0, None
    c = 1
    while c <= ceiling:
        if not meets(c):
            bad = c
            break
        good, c = c, c * 2
    if bad is None:
        return good
    while bad - good > max(1, resolution * good):
        mid = (good + bad) // 2
        good, bad = (mid, bad) if meets(mid) else (good, mid)
    return good


def _point(
    scenario: Scenario, out: Path, c: int, slos: list[Slo], tried: dict[int, Point], quiet: bool
) -> Point:
    if c in tried:
        return tried[c]
    analyses = [_run(scenario, out / f"c{c}", c, quiet)]
    figures = {s.name: judge(analyses, s) for s in slos}
    if any(f.met is None for f in figures.values()):  # undecided: once more, pooled
        analyses.append(_run(scenario, out / f"c{c}-repeat", c, quiet))
        figures = {s.name: judge(analyses, s) for s in slos}
    undecided = [f for f in figures.values() if f.met is None]
    for f in undecided:
        f.met = f.value is not None and f.within(f.value)
    point = Point(
        c,
        [str(a.run.path) for a in analyses],
        all(f.met for f in figures.values()),
        "point value" if undecided else "interval",
        figures,
    )
    tried[c] = point
    if not quiet:
        verdict = "met every SLO" if point.met else "missed an SLO"
        print(f"capacity: concurrency {c}: {verdict} ({point.decided_by})", flush=True)
    return point


def _run(scenario: Scenario, run_dir: Path, c: int, quiet: bool) -> Analysis:
    from harness.runner import run_point

    point = scenario.model_copy(
        update={"load": scenario.load.model_copy(update={"concurrency": c})}
    )
    run_point(point, run_dir, quiet=True)
    return analyze(load_run(run_dir))
