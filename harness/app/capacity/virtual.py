"""`harness capacity SCENARIO --simulate`: the capacity search on the virtual clock, exact.

On the virtual clock a run's figures are the cost model's, whatever the host does (docs/engine.md,
"The virtual clock"), so the wall-clock search's machinery for noise -- repeats near the knee, the
host's load, re-runs of non-monotone pairs (harness/app/capacity/search.py) -- has nothing to do: each point
is run once and decided by its own figures. The search doubles the concurrency from a guess until
a point misses, then bisects to the last concurrency met. Every point replays the same trace (built
once) in this process, each for `point_s` simulated seconds, and is analysed without a report.
What it finds is modelled (the simulated runner's cost model), not measured on a device.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.analysis.capacity import MET, MISSED, Rule
from harness.analysis.capacity import outcome as run_outcome
from harness.analysis.slo import Slo, parse_slos
from harness.app.runs_progress import RunsProgress
from harness.app.scenario import Scenario
from harness.errors import InputError
from harness.trace.model import Trace

CAPACITY_FILE = "capacity.json"
MODELLED = (
    "simulated on the virtual clock: every figure is the cost model's (modelled), not measured"
)


@dataclass
class Point:
    """One concurrency's run: its SLO figures, its verdict (met, missed, undecided), its hit rate."""

    concurrency: int
    state: str
    figures: dict[str, float | None]
    cache_hit_rate: float | None
    requests: int
    tasks: int
    wall_s: float
    path: str


@dataclass
class Search:
    """Exact search over one number (concurrency): each point measured once, remembered."""

    measure: Callable[[int], Point]
    ceiling: int
    points: dict[int, Point] = field(default_factory=dict)

    def ok(self, c: int) -> bool:
        """Not missed (met, or too few tasks to say): the search goes on above it."""
        if c not in self.points:
            self.points[c] = self.measure(c)
        return self.points[c].state != MISSED

    def run(self, guess: int = 1, factor: float = 2.0, resolution: float = 0.0) -> int | None:
        """The highest concurrency met below the first miss (None: none met)."""
        lo, hi = self._bracket(max(1, min(guess, self.ceiling)), factor)
        while hi is not None and hi - lo > max(1.0, resolution * lo):
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.ok(mid) else (lo, mid)
        met = [c for c, p in self.points.items() if p.state == MET and (hi is None or c < hi)]
        return max(met, default=None)

    def _bracket(self, c: int, factor: float) -> tuple[int, int | None]:
        """(a point not missed or 0, the first miss above it or None at the ceiling)."""
        if not self.ok(c):
            while c > 1:
                lower = max(1, int(c / factor))
                if self.ok(lower):
                    return lower, c
                c = lower
            return 0, c
        while c < self.ceiling:
            higher = min(self.ceiling, max(c + 1, int(c * factor)))
            if not self.ok(higher):
                return c, higher
            c = higher
        return c, None


def slos_of(scenario: Scenario) -> list[Slo]:
    slos = [s for s in parse_slos(scenario.slos, source="slos") if s.percentile is not None]
    if not slos:
        raise InputError("capacity needs percentile SLOs, e.g. slos: {ttft_p90: 1s}", field="slos")
    if scenario.load.load != "closed":
        raise InputError("capacity searches a closed loop's concurrency", field="load.mode")
    return slos


def at(scenario: Scenario, *, concurrency: int, point_s: float | None = None) -> Scenario:
    """The scenario at one concurrency, for `point_s` simulated seconds when given."""
    load: dict[str, float] = {"concurrency": concurrency}
    if point_s is not None:
        load["max_duration"] = point_s
    return scenario.model_copy(update={"load": scenario.load.model_copy(update=load)})


def measure_point(
    scenario: Scenario, trace: Trace, run_dir: Path, slos: list[Slo], rule: Rule
) -> Point:
    """Replay `scenario` (its concurrency) into `run_dir` and decide it on its summary."""
    from harness.analysis.summary import analyze_run
    from harness.app.runner import replay_point

    began = time.perf_counter()
    replay_point(scenario, trace, run_dir, show_progress=False)
    summary = analyze_run(run_dir)  # summary.json; `harness report RUN` draws the run's page
    wall = round(time.perf_counter() - began, 2)
    c = scenario.load.concurrency
    run = run_outcome(c, str(run_dir), summary, slos, {}, rule, wall)
    return Point(
        c,
        run.verdict(slos, rule),
        run.figures,
        summary.get("cache_hit_rate"),
        int(summary.get("requests_ok") or 0),
        run.tasks,
        wall,
        str(run_dir),
    )


def capacity_virtual(
    scenario: Scenario,
    out: Path,
    *,
    max_concurrency: int = 256,
    point_s: float | None = None,
    quiet: bool = False,
    say: Callable[[str], None] | None = None,
    bar: bool = False,
) -> dict:
    """The search, capacity.json and capacity.md in `out`; each point a progress line (`say`,
    else stdout): points done of the most the search can take, the time left at most, the
    answer so far; `bar`: a progress bar on stderr too."""
    from harness.app.build import build_trace
    from harness.app.capacity.search import check_ceiling

    slos, rule = slos_of(scenario), Rule()
    check_ceiling(max_concurrency, scenario)
    trace = build_trace(scenario)  # one trace for every point: the concurrency does not shape it
    log = (lambda _: None) if quiet else (say or _print)
    progress = RunsProgress(
        "capacity (simulated)", most_points(max_concurrency), None, log, bar and not quiet
    )

    def measure(c: int) -> Point:
        p = measure_point(
            at(scenario, concurrency=c, point_s=point_s), trace, out / f"c{c}", slos, rule
        )
        line = f"concurrency {c}: {p.state}, {_figures(p)}, {p.wall_s} s wall"
        progress.done(line, p.wall_s, _so_far(search, p))  # `search`: bound below
        return p

    search = Search(measure, max_concurrency)
    began = time.perf_counter()
    with progress:
        answer = search.run()
    result = _result(scenario, search, answer, slos, point_s, time.perf_counter() - began)
    (out / CAPACITY_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "capacity.md").write_text(capacity_markdown(result), encoding="utf-8")
    return result


def most_points(ceiling: int) -> int:
    """The most points the search can run: doubling from 1 to `ceiling`, then bisecting the
    last doubling's gap (or halving down from 1's miss: none)."""
    doublings = max(1, ceiling - 1).bit_length()
    return doublings + 1 + max(1, ceiling // 2).bit_length()


def _so_far(search: Search, p: Point) -> str:
    """The answer so far: the highest point met below every miss, and the first miss above it."""
    misses = [c for c, q in search.points.items() if q.state == MISSED]
    misses += [p.concurrency] if p.state == MISSED else []
    first_miss = min(misses, default=None)
    met = [c for c, q in [*search.points.items(), (p.concurrency, p)] if q.state == MET]
    best = max((c for c in met if first_miss is None or c < first_miss), default=None)
    return f"capacity {best or 'none yet'}, band {best or 0}-{first_miss or '?'}"


def _result(scenario, search: Search, answer, slos, point_s, wall_s: float) -> dict:
    misses = [c for c, p in search.points.items() if p.state == MISSED and c > (answer or 0)]
    first_miss = min(misses, default=None)
    binding = None if first_miss is None else missed_slos(search.points[first_miss], slos)
    return {
        "capacity": answer,
        "band": [answer, first_miss],
        "clock": "virtual",
        "modelled": True,
        "note": MODELLED,
        "slos": {s.name: s.bound for s in slos},
        "point_s": point_s or scenario.load.max_duration,
        "wall_s": round(wall_s, 1),
        "ceiling": search.ceiling,
        "at_ceiling": first_miss is None and answer is not None and answer >= search.ceiling,
        "binding": binding,
        "band_text": _band_text(answer, first_miss, search.ceiling, binding),
        "points": [asdict(search.points[c]) for c in sorted(search.points)],
    }


def missed_slos(p: Point, slos: list[Slo]) -> list[str]:
    """The SLOs a point missed, each with its figure against its bound: 'ttft_p90 1.02 > 1'."""
    out = []
    for s in slos:
        v = p.figures.get(s.name)
        if v is not None and (v > s.bound if s.is_upper else v < s.bound):
            out.append(f"{s.name} {_g(v)} {'>' if s.is_upper else '<'} {_g(s.bound)}")
    return out


def _band_text(
    answer: int | None, first_miss: int | None, ceiling: int, binding: list[str] | None
) -> str:
    if answer is None:
        return f"no concurrency met every SLO ({MODELLED})"
    if first_miss is None and answer >= ceiling:
        return (
            f"at least {answer}: every point up to the search's ceiling met every SLO; raise "
            f"--max-concurrency (now {ceiling}) to search past it ({MODELLED})"
        )
    why = f" ({', '.join(binding)})" if binding else ""
    above = f"; {first_miss} missed{why}" if first_miss is not None else ""
    return f"{answer} concurrent tasks met every SLO{above} ({MODELLED})"


def capacity_markdown(result: dict) -> str:
    slos = ", ".join(f"{k} {v:g}" for k, v in result["slos"].items())
    lines = [
        "# Capacity on the virtual clock",
        "",
        f"**Modelled, not measured**: {MODELLED}.",
        "",
        f"Answer: {result['band_text']}. SLOs: {slos}. Each point: one run of "
        f"{result['point_s']:g} simulated seconds (exact: a repeat gives the same figures).",
        "",
        "| concurrency | verdict | " + " | ".join(result["slos"]) + " | cache hit | requests |",
        "|---:|---|" + "---:|" * (len(result["slos"]) + 2),
    ]
    for p in result["points"]:
        figures = " | ".join(_g(p["figures"].get(k)) for k in result["slos"])
        lines.append(
            f"| {p['concurrency']} | {p['state']} | {figures} | {_g(p['cache_hit_rate'])} "
            f"| {p['requests']} |"
        )
    return "\n".join(lines) + "\n"


def _figures(p: Point) -> str:
    return ", ".join(f"{k} {_g(v)}" for k, v in p.figures.items())


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _print(line: str) -> None:
    print(line, flush=True)
