"""The key metrics over a series of runs (e.g. nightly), in run order, each against the one before.

Each run is compared with the run before it by `compare_analyses`, the very decision `harness
compare` makes (a bootstrap interval over tasks clear of 0 and |change| >= min_change); a point whose change is
significant and worse is a regression and is marked. Comparing with the previous run (not the
first) marks the night a regression arrived, not every night after it. Each point links to its
run's report.html (written where a run has none yet). The page is one self-contained file: the
figures are inline SVG, so the links are clickable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.analysis.compare.changes import MetricChange
from harness.analysis.compare.sides import HEADLINE, Side
from harness.analysis.compare.verdict import compare_analyses
from harness.analysis.ending import run_ending
from harness.analysis.run import load_runs
from harness.analysis.summary import Analysis, analyze

# The metrics drawn, by their `harness compare` keys.
TREND_METRICS = (
    "ttft_p90",
    "tpot_p90",
    "e2el_p90",
    "interactivity_p90",
    "tpgs",
    "cache_hit_rate",
    "error_rate",
)


@dataclass
class TrendPoint:
    run: str
    path: Path
    started_at: str | None
    values: dict[str, float | None]  # metric key -> the run's value
    changes: dict[
        str, MetricChange
    ]  # metric key -> against the previous run (absent for the first)
    ended: str | None = None  # how the run ended, when not cleanly (analysis.ending)

    @property
    def regressions(self) -> list[str]:
        return [k for k, c in self.changes.items() if c.verdict == "worse"]


@dataclass
class Trend:
    points: list[TrendPoint]
    labels: dict[str, str]  # metric key -> label
    alpha: float
    min_change: float

    @property
    def regressions(self) -> list[tuple[str, str]]:
        return [(p.run, k) for p in self.points for k in p.regressions]


def run_order(analyses: list[Analysis]) -> list[Analysis]:
    """Runs by the manifest's start time, then by name (a folder per night sorts by date too)."""
    return sorted(analyses, key=lambda a: (str(a.run.manifest.get("started_at") or ""), a.run.name))


def trend(run_dirs, alpha: float = 0.01, min_change: float = 0.02) -> tuple[Trend, list[Analysis]]:
    analyses = run_order([analyze(r) for r in load_runs(run_dirs)])
    metrics = [m for m in HEADLINE if m.key in TREND_METRICS]
    points = []
    for i, a in enumerate(analyses):
        changes = {}
        if i:
            earlier = analyses[: i - 1]  # the runs before the previous one: their spread is noise
            rows = compare_analyses(
                [analyses[i - 1]], [a], alpha=alpha, min_change=min_change, history=earlier
            ).rows
            changes = {r.key: r for r in rows if r.key in TREND_METRICS}
        points.append(
            TrendPoint(
                run=a.run.name,
                path=a.run.path,
                started_at=a.run.manifest.get("started_at"),
                values={m.key: m.value(Side([a])) for m in metrics},
                changes=changes,
                ended=run_ending(a.run.manifest),
            )
        )
    return Trend(points, {m.key: m.label for m in metrics}, alpha, min_change), analyses
