"""A capacity point decided on its runs: each run's SLO figure one sample, the band they leave.

A run (`RunOutcome`) is read from its summary.json: each percentile SLO's run-level figure
(`goodput.attained`), the tasks it served, and the host's load while it ran. A run *meets* when
every SLO's figure is within its bound; a run that served fewer than `Rule.min_tasks` tasks is
*undecided* (too little evidence), never met. A point (`PointVerdict`) is one concurrency's runs:
one run decides it when every figure is further than `Rule.near` (relative) from its bound;
otherwise it is near the knee and needs `Rule.repeats` decided runs, and the share of them that
met decides: all met -> met; fewer than half -> missed; between -> mixed. The spread between the
runs (mean and t-interval of each figure) is what the page shows beside that share: a bootstrap
inside one run sees none of it. The band runs from the capacity (the largest met point with no
failing point below it) to the lowest point missed above the highest met one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from harness.analysis import host_state
from harness.analysis.slo import Slo

MET, MISSED, MIXED, UNDECIDED = "met", "missed", "mixed", "undecided"
FAILING = (MISSED, MIXED)


@dataclass(frozen=True)
class Rule:
    min_tasks: int = 5  # tasks served (with a measured request) below which a run is undecided
    repeats: int = 3  # decided runs a point near the knee needs
    near: float = 0.2  # a figure within this share of its bound is near the knee
    # the one host screen (harness/analysis/host_state.py): a run whose threads waited for a CPU
    # more than this share of the time; without a wait share, other processes' load per CPU
    busy_load: float = host_state.MAX_LOAD_PER_CPU
    max_runs: int = 5  # runs of one point at most (busy hosts, non-monotone re-runs)
    max_wait_share: float = host_state.MAX_WAIT_SHARE


@dataclass
class RunOutcome:
    concurrency: int
    path: str
    figures: dict[str, float | None]  # each SLO's run-level figure
    tasks: int  # tasks with a measured request
    tasks_complete: int
    host: dict  # os.getloadavg before and after, the load during the run, this run's own CPU
    busy: bool
    wall_s: float

    def meets(self, slo: Slo) -> bool | None:
        value = self.figures.get(slo.name)
        if value is None:
            return None
        return within(slo, value)

    def verdict(self, slos: list[Slo], rule: Rule) -> str:
        met = [self.meets(s) for s in slos]
        if self.tasks < rule.min_tasks or None in met:
            return UNDECIDED
        return MET if all(met) else MISSED


def within(slo: Slo, value: float) -> bool:
    return value <= slo.bound if slo.is_upper else value >= slo.bound


def margin(slo: Slo, value: float) -> float:
    """How far `value` lies inside its bound, relative to it (negative: past it)."""
    if slo.bound == 0:
        return 0.0 if value == 0 else (-np.inf if slo.is_upper else np.inf)
    signed = (slo.bound - value) if slo.is_upper else (value - slo.bound)
    return float(signed / slo.bound)


def outcome(
    concurrency: int,
    path: str,
    summary: Mapping[str, Any],
    slos: list[Slo],
    host: dict,
    rule: Rule,
    wall_s: float,
) -> RunOutcome:
    attained = (summary.get("goodput") or {}).get("attained") or {}
    sessions = summary.get("sessions") or {}
    client = summary.get("client") or {}
    during = client.get("host_load")
    own = client.get("process_cpu_share")
    host = {**host, "during": during, "own_cpu_share": own}
    host["wait_share"] = client.get("run_queue_wait_share")
    return RunOutcome(
        concurrency,
        path,
        {s.name: (attained.get(s.name) or {}).get("value") for s in slos},
        int(sessions.get("tasks") or 0),
        int(sessions.get("tasks_complete") or 0),
        host,
        busy(summary, host, rule),
        wall_s,
    )


def run_load(host: dict) -> float | None:
    """The 1-minute load average the run saw: its mean during the run, else the one after it."""
    during = host.get("during")
    return during["load1_mean"] if during else (host.get("after") or [None])[0]


def others_load(host: dict) -> float | None:
    """Load per CPU from other processes: the run's load average less its own CPU share."""
    load, cpus = run_load(host), host.get("cpus")
    if load is None or not cpus:
        return None
    return host_state.others_load(load, host.get("own_cpu_share")) / cpus


def busy(summary: Mapping[str, Any], host: dict, rule: Rule) -> bool:
    """The one host screen on the run's summary; a run whose summary has no host sample at all
    is judged on the load average after it."""
    screen = host_state.Screen(rule.max_wait_share, rule.busy_load)
    client = summary.get("client") or {}
    if client.get("run_queue_wait_share") is not None or client.get("host_load"):
        return screen.state(summary).busy
    others = others_load(host)
    return others is not None and others > rule.busy_load


@dataclass
class Spread:
    """One SLO over a point's deciding runs: each run's figure a sample."""

    values: list[float | None]
    bound: float
    upper: bool
    missed_runs: int
    mean: float | None = None
    interval: tuple[float, float] | None = None  # 95 % t-interval of the mean, two runs or more

    @classmethod
    def of(cls, slo: Slo, runs: list[RunOutcome]) -> Spread:
        values = [r.figures.get(slo.name) for r in runs]
        xs = np.array([v for v in values if v is not None], dtype=float)
        missed = sum(1 for v in values if v is not None and not within(slo, v))
        spread = cls(values, slo.bound, slo.is_upper, missed)
        if xs.size:
            spread.mean = float(xs.mean())
        if xs.size >= 2:
            half = stats.t.ppf(0.975, xs.size - 1) * xs.std(ddof=1) / np.sqrt(xs.size)
            spread.interval = (float(xs.mean() - half), float(xs.mean() + half))
        return spread


@dataclass
class PointVerdict:
    concurrency: int
    state: str
    met_runs: int
    decided_runs: int
    near: bool  # some figure near its bound: decided on repeats
    wants: int  # more runs this point needs before it is decided
    busy_wants: int  # a run more it asks for because the host was busy (if the budget allows)
    busy_runs: int
    runs: list[RunOutcome]
    slos: dict[str, Spread] = field(default_factory=dict)

    @property
    def share(self) -> str:
        return f"{self.met_runs} of {self.decided_runs}"


def decide(concurrency: int, runs: list[RunOutcome], slos: list[Slo], rule: Rule) -> PointVerdict:
    """The point's state from its runs so far, and how many more it asks for. The runs on a quiet
    host decide when there are enough of them; otherwise every decided run does, flagged."""
    decided = [r for r in runs if r.verdict(slos, rule) != UNDECIDED]
    quiet = [r for r in decided if not r.busy]
    near = _near(decided, slos, rule)
    needed = rule.repeats if near else 1
    deciding = quiet if len(quiet) >= needed else decided
    met = sum(1 for r in deciding if r.verdict(slos, rule) == MET)
    room = max(0, rule.max_runs - len(runs))
    wants = min(room, needed - len(decided)) if decided and len(decided) < needed else 0
    # a host busy with other work can only have made the point worse: unless it met clear of
    # its bounds, one run more, in the hope of a quieter host
    state = _state(met, len(deciding), needed)
    clearly_met = state == MET and not near
    busy_wants = int(
        bool(decided)
        and not (wants or clearly_met)
        and room > 0
        and len(quiet) < needed
        and len(runs) <= needed
    )
    return PointVerdict(
        concurrency,
        state,
        met,
        len(deciding),
        near,
        wants,
        busy_wants,
        sum(1 for r in deciding if r.busy),
        runs,
        {s.name: Spread.of(s, deciding or runs) for s in slos},
    )


def _near(decided: list[RunOutcome], slos: list[Slo], rule: Rule) -> bool:
    """Near the knee: a run whose figures are neither all clearly within their bounds nor one
    clearly past it, or runs that disagree."""

    def clear(r: RunOutcome) -> bool:
        margins = [margin(s, v) for s in slos if (v := r.figures.get(s.name)) is not None]
        return all(m >= rule.near for m in margins) or any(m <= -rule.near for m in margins)

    verdicts = {r.verdict(slos, rule) for r in decided}
    return len(verdicts) > 1 or not all(clear(r) for r in decided)


def _state(met: int, n: int, needed: int) -> str:
    if n == 0:
        return UNDECIDED
    if n < needed:  # near the knee without its repeats (the budget ran out): never met
        return MISSED if met == 0 else UNDECIDED
    if met == n:
        return MET
    return MISSED if 2 * met < n else MIXED
