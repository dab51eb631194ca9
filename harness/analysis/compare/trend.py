"""The key metrics over a series of runs (e.g. nightly), in run order, each judged against the one before.

Runs of another trace, load or target configuration are another series, never one line; each
series is described by how it differs from the first, in the scenario file's words. In each
series a night (a gate's runs, `nights.night_of`; a run made alone is a night of its own) is
judged against the night before it with every earlier night of the series as history
(`verdict.judge_analyses`: the rule `harness compare` uses, night against night), so a night with
no usable history is at most `inconclusive`, never `regressed`; a night judged regressed is left
out of the history of the nights after it. The verdict is drawn at a night's last run, from all
its runs: a night's runs are one sample, and a run judged alone against nights of several runs
would be held to their means' narrower spread (and its night's later runs, against each other,
could not see a change the whole night shares). Comparing with the previous night marks the night
a regression arrived in. A night that starts a series after other runs has nothing like it before
it: `not comparable`, so a nightly job whose load or trace changed is never green. The trend's
own verdict is the latest night's (the worst over the series' latest nights), for a nightly job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis.compare.changes import REGRESSED, MetricChange
from harness.analysis.compare.comparable import trace_identity
from harness.analysis.compare.nights import night_of
from harness.analysis.compare.settings import (
    differences,
    load_settings,
    target_config,
    workload_settings,
)
from harness.analysis.compare.sides import HEADLINE, Side
from harness.analysis.compare.verdict import ALPHA, MIN_CHANGE, Verdict, judge_analyses
from harness.analysis.ending import run_ending
from harness.analysis.loader import load_runs
from harness.analysis.summary import Analysis, analyze

# The metrics drawn and judged, by their `harness compare` keys.
TREND_METRICS = (
    "ttft_p90",
    "tpot_p90",
    "e2el_p90",
    "interactivity_p90",
    "tpgs",
    "cache_hit_rate",
    "error_rate",
)
_WORST = (Verdict.REGRESSED, Verdict.NOT_COMPARABLE, Verdict.INCONCLUSIVE, Verdict.NO_CHANGE)


@dataclass
class TrendPoint:
    run: str
    path: Path
    started_at: str | None
    values: dict[str, float | None]  # metric key -> the run's value
    changes: dict[str, MetricChange]  # metric key -> against the previous run of its series
    ended: str | None = None  # how the run ended, when not cleanly (analysis.ending)
    series: int = 0  # index into Trend.series
    verdict: Verdict | None = (
        None  # None: the first night of all, or not its night's last run (`judged_at`)
    )
    why_not_comparable: str | None = None  # how it differs from the run before it
    runs_needed: int | None = None
    nights_needed: int | None = None  # judged by night: more earlier nights likely deciding it
    why_inconclusive: str | None = None  # e.g. one earlier night: how nights differ is unknown
    history: list[str] = field(default_factory=list)  # the earlier runs used as noise
    left_out: list[tuple[str, str]] = field(default_factory=list)
    judged_at: str | None = None  # not its night's last run: the run whose point judges the night

    @property
    def regressions(self) -> list[str]:
        return [k for k, c in self.changes.items() if c.verdict == REGRESSED]


@dataclass
class Trend:
    points: list[TrendPoint]
    labels: dict[str, str]  # metric key -> label
    alpha: float
    min_change: float
    series: list[str] = field(default_factory=list)  # each series in words

    @property
    def regressions(self) -> list[tuple[str, str]]:
        return [(p.run, k) for p in self.points for k in p.regressions]

    @property
    def verdict(self) -> Verdict | None:
        """The latest run's verdict, the worst over the series; None: no series has two runs (of two nights)."""
        latest = {p.series: p for p in self.points}
        found = [p.verdict for p in latest.values() if p.verdict is not None]
        return next((v for v in _WORST if v in found), None)

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict is None else self.verdict.exit_code


def run_order(analyses: list[Analysis]) -> list[Analysis]:
    """Runs by the manifest's start time, then by name (a folder per night sorts by date too)."""
    return sorted(analyses, key=lambda a: (str(a.run.manifest.get("started_at") or ""), a.run.name))


def series_key(a: Analysis) -> tuple:
    """What must match for two runs to be one series: trace, load and target configuration."""
    load = tuple((k, repr(v)) for k, v in (load_settings(a) or {}).items())
    target = tuple(sorted((k, repr(v)) for k, v in target_config(a).items()))
    return (trace_identity(a), load, target)


def trend(
    run_dirs, alpha: float = ALPHA, min_change: float = MIN_CHANGE
) -> tuple[Trend, list[Analysis]]:
    analyses = run_order([analyze(r) for r in load_runs(run_dirs)])
    metrics = [m for m in HEADLINE if m.key in TREND_METRICS]
    keys = list(dict.fromkeys(series_key(a) for a in analyses))
    members: dict[tuple, list[Analysis]] = {k: [] for k in keys}
    flagged: set[str] = set()
    points = []
    last = {night_of(a): i for i, a in enumerate(analyses)}  # each night's last run
    for i, a in enumerate(analyses):
        key, night = series_key(a), night_of(a)
        before = members[key]
        point = TrendPoint(
            run=a.run.name,
            path=a.run.path,
            started_at=a.run.manifest.get("started_at"),
            values={m.key: m.value(Side([a])) for m in metrics},
            changes={},
            ended=run_ending(a.run.manifest),
            series=keys.index(key),
        )
        before.append(a)
        if last[night] != i:
            point.judged_at = analyses[last[night]].run.name
        else:
            _judge_night(point, before, analyses[: i + 1], flagged, alpha, min_change)
        points.append(point)
    labels = {m.key: m.label for m in metrics}
    return Trend(points, labels, alpha, min_change, _describe(analyses, keys)), analyses


def _judge_night(
    point: TrendPoint, before: list[Analysis], so_far: list[Analysis], flagged, alpha, min_change
) -> None:
    """At a night's last run (`before[-1]`; `before`: its series so far, `so_far`: every run
    so far): its night against the night before, or not comparable as a new series's first."""
    night = night_of(before[-1])
    earlier = [b for b in before if night_of(b) != night]
    tonight = [b for b in before if night_of(b) == night]
    if earlier:
        _judge(point, earlier, tonight, flagged, alpha, min_change)
    elif len(before) < len(so_far):  # a new series after other runs: nothing like it before it
        point.verdict = Verdict.NOT_COMPARABLE
        point.why_not_comparable = _new_series(so_far[-len(before) - 1], before[-1])


def _judge(
    point: TrendPoint,
    earlier: list[Analysis],
    night: list[Analysis],
    flagged: set[str],
    alpha,
    min_change,
) -> None:
    """`night`'s runs judged against the night before them, the earlier nights as history."""
    previous = night_of(earlier[-1])
    j = judge_analyses(
        [b for b in earlier if night_of(b) == previous],
        night,
        history=[b for b in earlier if night_of(b) != previous],
        alpha=alpha,
        min_change=min_change,
        flagged=flagged,
        gate_keys=TREND_METRICS,
    )
    point.changes = {r.key: r for r in j.rows if r.key in TREND_METRICS}
    point.verdict, point.runs_needed, point.nights_needed = (
        j.verdict,
        j.runs_needed,
        j.nights_needed,
    )
    point.why_inconclusive = j.why_inconclusive
    point.why_not_comparable = j.why_not_comparable
    point.history, point.left_out = j.history, j.left_out
    if j.verdict == Verdict.REGRESSED:
        flagged.update(str(b.run.path.resolve()) for b in night)


def _describe(analyses: list[Analysis], keys: list[tuple]) -> list[str]:
    """Each series in words: the first as is, the others by how they differ from it (series 1's
    value first)."""
    first = {series_key(a): a for a in reversed(analyses)}
    if not keys:
        return []
    head = first[keys[0]]
    return ["series 1"] + [
        f"series {i}: {how_it_differs(head, first[key])} (series 1 vs series {i})"
        for i, key in enumerate(keys[1:], start=2)
    ]


def how_it_differs(reference: Analysis, other: Analysis) -> str:
    """Trace, load and target fields that differ, in the scenario's words, the reference first."""
    parts = []
    if trace_identity(reference) != trace_identity(other):
        named = differences(workload_settings(reference), workload_settings(other))
        parts.append(named or "another trace (the same workload settings)")
    parts.append(differences(load_settings(reference) or {}, load_settings(other) or {}))
    parts.append(differences(target_config(reference), target_config(other)))
    return "; ".join(p for p in parts if p) or "another trace"


def _new_series(before: Analysis, a: Analysis) -> str:
    return (
        f"{a.run.name} starts a new series: {how_it_differs(before, a)} "
        "(the run before it vs this one)"
    )
