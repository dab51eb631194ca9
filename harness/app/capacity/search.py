"""`harness capacity SCENARIO`: the most concurrent tasks the target serves within the SLOs, as a
band decided on repeated runs.

The search runs the scenario at `load.concurrency` 1, 2, 4, ... (single runs while a point's
figures are clearly within or clearly past their bounds), then bisects between the last point met
and the first that was not. A point near the knee is run `Rule.repeats` times and decided on the
share of its runs that met every SLO (harness/analysis/capacity.py): the noise that moves a
capacity is between runs, so a run is the unit. Once the point above the first miss has been
tried too, a failing point below a met one (non-monotone) has both re-run, and the search runs
again on what they say. A bisection of the band's upper edge follows: the lowest point missed by
most of its runs. Each run records the host's load; a run on a busy host is flagged and repeated
while the budget allows. `capacity.json` holds the answer, the band and every run; `capacity.html`
draws it (harness/report/capacity.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.analysis import capacity_band as curve
from harness.analysis.capacity import FAILING, MET, MIXED, PointVerdict, Rule, RunOutcome, decide
from harness.analysis.capacity import outcome as run_outcome
from harness.analysis.slo import Slo, parse_slos
from harness.app.runs_progress import RunsProgress
from harness.app.scenario import Scenario
from harness.errors import InputError
from harness.report.capacity import band_sentence, binding_sentence, write_capacity_report

CAPACITY_FILE = "capacity.json"
OPTIONAL_SHARE = (
    0.6  # optional runs (busy host, re-runs, the look above) only in this share of the budget
)
FIX_ROUNDS = 2  # non-monotone re-runs, then the search again, at most this often

Measure = Callable[[int, int], RunOutcome]  # (concurrency, run number) -> the run's outcome


@dataclass(frozen=True)
class Settings:
    max_concurrency: int = 256
    resolution: float = 0.1  # bisection stops once the gap is this share of the answer
    budget_s: float | None = 20 * 60  # wall-clock budget of the whole search (None: none)
    look_above: bool = True  # try the point above the first miss (non-monotone curves)
    rule: Rule = field(default_factory=Rule)


class Search:
    def __init__(
        self,
        measure: Measure,
        slos: list[Slo],
        settings: Settings,
        log: Callable[[str], None] = lambda line: None,
        clock: Callable[[], float] = time.monotonic,
        progress: RunsProgress | None = None,
    ) -> None:
        self.measure, self.slos, self.settings, self.log = measure, slos, settings, log
        self.progress = progress
        self.clock, self.start = clock, clock()
        self.runs: dict[int, list[RunOutcome]] = {}
        self.rerun: list[dict] = []
        self.exhausted = False

    @property
    def points(self) -> dict[int, PointVerdict]:
        return {c: self.verdict(c) for c in self.runs}

    def verdict(self, c: int) -> PointVerdict:
        return decide(c, self.runs.get(c, []), self.slos, self.settings.rule)

    def spent(self, share: float = 1.0) -> bool:
        budget = self.settings.budget_s
        over = budget is not None and self.clock() - self.start >= share * budget
        self.exhausted |= over and share == 1.0
        return over

    def run_once(self, c: int) -> None:
        runs = self.runs.setdefault(c, [])
        runs.append(self.measure(c, len(runs) + 1))
        r = runs[-1]
        busy = " (host busy)" if r.busy else ""
        figures = ", ".join(f"{k} {_g(v)}" for k, v in r.figures.items())
        line = f"concurrency {c} run {len(runs)}: {figures}, {r.tasks} tasks{busy}"
        if self.progress is None:
            self.log(f"capacity: {line}")
            return
        low, high = curve.band(self.points)
        self.progress.done(line, r.wall_s, f"capacity {low}, band {low}-{high or '?'}")

    def evaluate(self, c: int) -> PointVerdict:
        v, before = self.verdict(c), len(self.runs.get(c, []))
        while not self.spent() and (
            not self.runs.get(c) or v.wants or (v.busy_wants and not self.spent(OPTIONAL_SHARE))
        ):
            self.run_once(c)
            v = self.verdict(c)
        if len(self.runs.get(c, [])) > before:
            self.log(f"capacity: concurrency {c}: {describe(v)}")
        return v

    def top_up(self, c: int) -> None:
        """Re-run a point to the rule's most runs (a non-monotone pair), while the budget allows."""
        while len(self.runs[c]) < self.settings.rule.max_runs and not self.spent(OPTIONAL_SHARE):
            self.run_once(c)

    def search(self) -> dict[int, PointVerdict]:
        good, bad = self._double()
        if bad is not None and self.settings.look_above:
            above = min(2 * bad, self.settings.max_concurrency)
            if above > bad and not self.spent(OPTIONAL_SHARE):
                self.evaluate(above)
        self._bisect_capacity()
        for _ in range(FIX_ROUNDS):
            pairs = curve.non_monotone(self.points)
            if not pairs or self.spent(OPTIONAL_SHARE):
                break
            self._fix(pairs)
            self._bisect_capacity()
        self._bisect_band()
        return self.points

    def _double(self) -> tuple[int, int | None]:
        c, ceiling = 1, self.settings.max_concurrency
        while not self.spent():
            self.evaluate(c)
            good, bad = curve.bracket(self.points)
            if bad is not None or c >= ceiling:
                return good, bad
            c = min(2 * c, ceiling)
        return curve.bracket(self.points)

    def _bisect(self, lo: int, hi: int, ok: Callable[[str], bool]) -> None:
        while hi - lo > max(1.0, self.settings.resolution * lo) and not self.spent():
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if ok(self.evaluate(mid).state) else (lo, mid)

    def _bisect_capacity(self) -> None:
        good, bad = curve.bracket(self.points)
        if bad is not None:  # from the highest point below the miss (met, or too few tasks)
            lo = max([good, *(c for c in self.runs if c < bad)])
            self._bisect(lo, bad, lambda state: state == MET)

    def _bisect_band(self) -> None:
        """Between the highest point mostly met below the band's top and the top itself."""
        _, top = curve.band(self.points)
        if top is None:
            return
        below = [c for c, p in self.points.items() if c < top and p.state in (MET, MIXED)]
        if below:
            self._bisect(max(below), top, lambda state: state in (MET, MIXED))

    def _fix(self, pairs: list[tuple[int, int]]) -> None:
        before = self.points
        for c in sorted({c for pair in pairs for c in pair}):
            self.top_up(c)
        after = self.points
        for lo, hi in pairs:
            still = after[lo].state in FAILING and after[hi].state == MET
            self.rerun.append(
                {
                    "lower": lo,
                    "higher": hi,
                    "before": [before[lo].share, before[hi].share],
                    "after": [after[lo].share, after[hi].share],
                    "persists": still,
                }
            )
            self.log(
                f"capacity: not monotone: {lo} {before[lo].state} ({before[lo].share}) below "
                f"{hi} met ({before[hi].share}); re-run: {after[lo].share} and {after[hi].share}"
            )


def describe(v: PointVerdict) -> str:
    how = "near the bound, decided on repeats" if v.near else "clear of the bound"
    busy = f"; {v.busy_runs} run(s) on a busy host" if v.busy_runs else ""
    return f"{v.state} in {v.share} runs ({how}{busy})"


def capacity(
    scenario: Scenario,
    out: Path,
    settings: Settings | None = None,
    *,
    quiet: bool = False,
    say: Callable[[str], None] | None = None,
    bar: bool = False,
) -> dict:
    """The search, capacity.json and capacity.html in `out`; each run a progress line (`say`,
    else stdout), a bar on stderr when `bar`."""
    settings = settings or Settings()
    slos = [s for s in parse_slos(scenario.slos, source="slos") if s.percentile is not None]
    if not slos:
        raise InputError("capacity needs percentile SLOs, e.g. slos: {ttft_p90: 1s}", field="slos")
    if scenario.load.load != "closed":
        raise InputError("capacity searches a closed loop's concurrency", field="load.mode")
    check_ceiling(settings.max_concurrency, scenario)
    measure = _measure(scenario, out, slos, settings.rule, quiet)
    log = (lambda _: None) if quiet else (say or _print)
    budget_min = None if settings.budget_s is None else settings.budget_s / 60
    progress = RunsProgress("capacity", None, budget_min, log, bar and not quiet)
    with progress:
        search = Search(measure, slos, settings, log=log, progress=progress)
        points = search.search()
    result = _result(search, points, slos, settings)
    (out / CAPACITY_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_capacity_report(result, out)
    return result


def _result(search: Search, points: dict[int, PointVerdict], slos, settings: Settings) -> dict:
    low, high = curve.band(points)
    result = {
        "capacity": low,
        "band": [low, high],
        "slos": {s.name: s.bound for s in slos},
        "binding": curve.binding(points, slos),
        "non_monotone": search.rerun
        + [{"lower": lo, "higher": hi, "persists": True} for lo, hi in _unfixed(search, points)],
        "rule": asdict(settings.rule),
        "budget": {
            "budget_s": settings.budget_s,
            "spent_s": round(search.clock() - search.start, 1),
            "exhausted": search.exhausted,
        },
        "points": [_point(points[c]) for c in sorted(points)],
    }
    result["ceiling"] = settings.max_concurrency
    result["at_ceiling"] = high is None and low == settings.max_concurrency
    result["band_text"] = band_sentence(result)
    result["binding_text"] = binding_sentence(result)
    return result


def check_ceiling(ceiling: int, scenario: Scenario) -> None:
    """Refuse, before any run, a ceiling the trace cannot hold (100 tasks per main session)."""
    from harness.app.build import build_trace

    sessions = len(build_trace(scenario).main_sessions)
    if ceiling > 100 * max(sessions, 1):
        raise InputError(
            f"{ceiling} is above the {100 * sessions} concurrent tasks a trace of {sessions} main "
            "sessions holds (100 each): raise workload.sessions",
            field="--max-concurrency",
        )


def _unfixed(search: Search, points) -> list[tuple[int, int]]:
    """Non-monotone pairs no re-run looked at (the budget ran out first)."""
    seen = {(r["lower"], r["higher"]) for r in search.rerun}
    return [pair for pair in curve.non_monotone(points) if pair not in seen]


def _point(v: PointVerdict) -> dict:
    return {
        "concurrency": v.concurrency,
        "state": v.state,
        "met": v.state == MET,
        "met_runs": v.met_runs,
        "decided_runs": v.decided_runs,
        "near": v.near,
        "busy_runs": v.busy_runs,
        "slos": {k: asdict(s) for k, s in v.slos.items()},
        "runs": [asdict(r) for r in v.runs],
    }


def _measure(scenario: Scenario, out: Path, slos: list[Slo], rule: Rule, quiet: bool) -> Measure:
    from harness.analysis.summary import analyze_run
    from harness.app.runner import build_trace, replay_point

    def measure(c: int, k: int) -> RunOutcome:
        point = scenario.model_copy(
            update={"load": scenario.load.model_copy(update={"concurrency": c})}
        )
        run_dir = out / f"c{c}-r{k}"
        host = {"cpus": os.cpu_count(), "before": list(os.getloadavg())}
        began = time.perf_counter()
        replay_point(point, build_trace(point), run_dir, show_progress=False)
        summary = analyze_run(run_dir)  # summary.json; `harness report RUN` draws the run's page
        host["after"] = list(os.getloadavg())
        wall = time.perf_counter() - began
        return run_outcome(c, str(run_dir), summary, slos, host, rule, round(wall, 1))

    return measure


def _print(line: str) -> None:
    print(line, flush=True)


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
