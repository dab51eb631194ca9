"""Baseline vs run: every headline metric, its change, and whether the change is real.

Each figure's change gets its own interval at level 1 - alpha from a bootstrap over tasks (over
time blocks for rates), with repeats drawn too (`evidence.py`): the unit of evidence is the task,
not the request. A change is *significant* when its interval excludes no change AND the change is
at least `min_change` (asv's rule: a test and a size threshold), its direction the interval's;
anything else is shown as `~`. A `--fail-on` threshold fails only on a significant change at
least that large, so noise does not break a nightly job. Figures the two sides do not measure alike
(different traces or load, another tool's definition) get no verdict: "not comparable".
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np

from harness.analysis.compare import evidence
from harness.analysis.compare.comparable import not_comparable
from harness.analysis.compare.sides import HEADLINE, Headline, Side
from harness.analysis.context_limit import invalid_reasons
from harness.analysis.ending import run_ending
from harness.analysis.run import load_runs
from harness.analysis.summary import analyze
from harness.errors import InputError

_SPEC = re.compile(
    r"^\s*(?P<key>[a-z0-9_]+)\s*:\s*(?P<sign>[+-])(?P<num>\d+(?:\.\d+)?)(?P<pct>%?)\s*$"
)


@dataclass(frozen=True)
class Threshold:
    key: str
    increase: bool  # '+': fail when the metric rises past it; '-': when it falls
    amount: float
    relative: bool  # '%': a fraction of the baseline; otherwise in the metric's own units

    def crossed(self, row: MetricChange) -> bool:
        """A real change (its interval clear of 0: significance) at least this large (size)."""
        if not row.significant or row.baseline is None or row.run is None:
            return False
        delta = row.run - row.baseline
        if self.relative:
            if row.baseline == 0:
                return False
            delta /= abs(row.baseline)
        return delta >= self.amount if self.increase else delta <= -self.amount

    def __str__(self) -> str:
        return f"{self.key}:{'+' if self.increase else '-'}{self.amount * (100 if self.relative else 1):g}{'%' if self.relative else ''}"


@dataclass
class MetricChange:
    key: str
    label: str
    better: str  # "lower" | "higher"
    baseline: float | None
    run: float | None
    change: float | None  # relative: (run - baseline) / |baseline|
    p_value: float | None  # the bootstrap's two-sided p of no change
    significant: bool
    verdict: str  # "~" (not significant), "better", "worse", "not comparable"
    n_baseline: int  # samples behind the figure (requests, tokens or time blocks)
    n_run: int
    interval: tuple[float, float] | None = None  # of the relative change, at level 1 - alpha
    interval_abs: tuple[float, float] | None = None  # of run - baseline
    units: tuple[int, int] = (0, 0)  # units of evidence (tasks or time blocks) per side
    why_not: str | None = None  # why the sides are not comparable on this figure
    noise_band: float | None = None  # the largest relative spread between history runs


@dataclass
class CompareResult:
    baseline: list[str]
    run: list[str]
    counts: dict  # side -> {"ok": n, "failed": n}
    rows: list[MetricChange]
    thresholds: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    alpha: float = 0.01
    min_change: float = 0.02
    notes: list[str] = field(default_factory=list)  # runs imported from other tools: what differs

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def to_dict(self) -> dict:
        return asdict(self)


def parse_fail_on(spec: str | None) -> list[Threshold]:
    if not spec:
        return []
    known = {m.key for m in HEADLINE}
    out = []
    for item in spec.split(","):
        m = _SPEC.match(item)
        if m is None:
            raise InputError(
                f"bad threshold {item.strip()!r}: expected METRIC:+N% or METRIC:-N",
                field="--fail-on",
            )
        if m["key"] not in known:
            raise InputError(
                f"unknown metric {m['key']!r} (known: {', '.join(sorted(known))})",
                field="--fail-on",
            )
        relative = bool(m["pct"])
        amount = float(m["num"]) / (100 if relative else 1)
        out.append(Threshold(m["key"], m["sign"] == "+", amount, relative))
    return out


def compare_runs(
    baseline_dirs,
    run_dirs,
    fail_on: str | None = None,
    alpha: float = 0.01,
    min_change: float = 0.02,
    history_dirs=None,
    allow_unclosed: bool = False,
) -> CompareResult:
    base = [analyze(r) for r in load_runs(_as_list(baseline_dirs))]
    cand = [analyze(r) for r in load_runs(_as_list(run_dirs))]
    sides = {str(a.run.path.resolve()) for a in [*base, *cand]}
    history = [
        analyze(r)
        for r in load_runs(_as_list(history_dirs or []))
        if str(r.path.resolve()) not in sides
    ]
    return compare_analyses(base, cand, fail_on, alpha, min_change, history, allow_unclosed)


def noise_band(history: list, metric: Headline) -> float | None:
    """The largest relative difference of `metric` between two history runs (None: < 2 runs)."""
    values = [v for a in history if (v := metric.value(Side([a]))) is not None]
    pairs = [(x, y) for i, x in enumerate(values) for y in values[i + 1 :] if x != 0]
    return max((abs(y - x) / abs(x) for x, y in pairs), default=None)


def compare_analyses(
    baseline: list,
    run: list,
    fail_on: str | None = None,
    alpha: float = 0.01,
    min_change: float = 0.02,
    history: list | None = None,
    allow_unclosed: bool = False,
) -> CompareResult:
    """`compare_runs` on runs already analyzed (the report compares the runs it shows).
    `history`: earlier runs of the same scenario; how far their figures stray from each other is
    noise, and a change must leave that band to be significant. A gate (`fail_on`) refuses to
    judge a run that was not closed or failed, unless `allow_unclosed`."""
    thresholds = parse_fail_on(fail_on)
    if thresholds and not allow_unclosed:
        refuse_unclosed([*baseline, *run])
    base, cand = Side(baseline), Side(run)
    why_not = not_comparable(baseline, run)
    earlier = [a for a in history or [] if not not_comparable(baseline, [a])]
    rng = evidence.rng()
    rows = []
    for metric in HEADLINE:
        band = noise_band(earlier, metric)
        floor = max(min_change, band) if band is not None else min_change
        row = _change(metric, base, cand, alpha, floor, rng, why_not.get(metric.key))
        row.noise_band = band
        rows.append(row)
    by_key = {r.key: r for r in rows}
    failures = [
        f"{t.key} {by_key[t.key].baseline:.4g} -> {by_key[t.key].run:.4g} ({_fmt_change(by_key[t.key])})"
        f" crosses {t} (interval {_fmt_interval(by_key[t.key], t.relative)})"
        for t in thresholds
        if t.crossed(by_key[t.key])
    ]
    invalid = invalid_notes([*baseline, *run])  # issue 23: a gate fails on an invalid run
    return CompareResult(
        baseline=base.names,
        run=cand.names,
        counts={"baseline": base.counts(), "run": cand.counts()},
        rows=_measured(rows),
        thresholds=[str(t) for t in thresholds],
        failures=failures + (invalid if thresholds else []),
        alpha=alpha,
        min_change=min_change,
        notes=import_notes([*baseline, *run])
        + ending_notes([*baseline, *run])
        + invalid
        + _server_wide_note(rows),
    )


def _server_wide_note(rows: list[MetricChange]) -> list[str]:
    wide = {m.key for m in HEADLINE if m.server_wide}
    if not any(r.key in wide and (r.baseline, r.run) != (None, None) for r in rows):
        return []
    return [
        "spec-decode rows: the servers' /metrics counters over each whole run, no samples to"
        " draw an interval from; significant when the change is at least --min-change"
    ]


def invalid_notes(analyses: list) -> list[str]:
    """One line per invalid run (analysis/context_limit.py): a gate does not pass it."""
    return [f"{a.run.name} is INVALID: {r}" for a in analyses for r in invalid_reasons(a.summary)]


def _measured(rows: list[MetricChange]) -> list[MetricChange]:
    """Every row, less the server-wide ones neither side measured (no spec decoding)."""
    wide = {m.key for m in HEADLINE if m.server_wide}
    return [r for r in rows if r.key not in wide or (r.baseline, r.run) != (None, None)]


def ending_notes(analyses: list) -> list[str]:
    """One line per run that did not end cleanly: how it ended."""
    notes = ((a.run.name, run_ending(a.run.manifest)) for a in analyses)
    return [f"{name}: {note}" for name, note in notes if note]


def refuse_unclosed(analyses: list) -> None:
    for a in analyses:
        if a.run.manifest.get("status") in ("running", "failed"):
            raise InputError(
                f"{a.run.name}: {run_ending(a.run.manifest)}; a gate does not judge it "
                "(--allow-unclosed to judge it anyway)",
                field="--fail-on",
            )


def import_notes(analyses: list) -> list[str]:
    """One line per imported run: its tool, and the manifest's notes on what it defines differently."""
    out = []
    for a in analyses:
        imported = a.run.manifest.get("imported")
        if imported:
            out.append(
                f"{a.run.name}: imported from {imported['tool']}; defined differently or missing: "
                + "; ".join(imported.get("notes", []))
            )
    return out


def _as_list(dirs) -> list:
    return [dirs] if isinstance(dirs, str) or not hasattr(dirs, "__iter__") else list(dirs)


def _change(
    metric: Headline,
    base: Side,
    cand: Side,
    alpha: float,
    min_change: float,
    rng: np.random.Generator,
    why_not: str | None,
) -> MetricChange:
    b, r = metric.value(base), metric.value(cand)
    runs_b = [metric.evidence(a) for a in base.analyses]
    runs_c = [metric.evidence(a) for a in cand.analyses]
    n = (sum(c.values.size for c in runs_b), sum(c.values.size for c in runs_c))
    units = (sum(c.units for c in runs_b), sum(c.units for c in runs_c))
    change = (r - b) / abs(b) if b not in (None, 0) and r is not None else None
    row = MetricChange(
        metric.key, metric.label, metric.better, b, r, change, None, False, "~", *n, units=units
    )
    if why_not is not None:
        row.verdict, row.why_not = "not comparable", why_not
        return row
    if metric.server_wide:
        return _on_size(row, min_change)
    if b is None or r is None or min(units) < 2:
        return row  # too little evidence to judge: never called significant
    boot = evidence.change_interval(
        evidence.replicates(runs_b, metric.statistic, rng),
        evidence.replicates(runs_c, metric.statistic, rng),
        alpha,
    )
    return _judged(row, boot, min_change)


def _on_size(row: MetricChange, min_change: float) -> MetricChange:
    """A figure with no samples to draw (a server's counters over the whole run): significant
    when it moved by at least `min_change`, with no interval to show."""
    if row.baseline is None or row.run is None or row.change is None:
        return row
    if abs(row.change) >= min_change:
        row.significant = True
        worse = (row.change > 0) == (row.better == "lower")
        row.verdict = "worse" if worse else "better"
    return row


def _judged(row: MetricChange, boot: evidence.Interval | None, min_change: float) -> MetricChange:
    if boot is None:
        return row
    row.interval, row.interval_abs, row.p_value = boot.relative, boot.absolute, boot.p_value
    lo, hi = boot.absolute
    if lo <= 0 <= hi:
        return row
    # From a zero baseline (no errors) any change is large enough; the interval still decides.
    large = abs(row.change) >= min_change if row.change is not None else row.run not in (None, 0)
    if large:
        row.significant = True
        worse = (lo > 0) == (row.better == "lower")
        row.verdict = "worse" if worse else "better"
    return row


def _fmt_change(row: MetricChange) -> str:
    return "n/a" if row.change is None else f"{row.change * 100:+.1f}%"


def _fmt_interval(row: MetricChange, relative: bool) -> str:
    bounds = row.interval if relative else row.interval_abs
    if bounds is None:
        return "n/a"
    if relative:
        return f"[{bounds[0] * 100:+.1f}%, {bounds[1] * 100:+.1f}%]"
    return f"[{bounds[0]:+.4g}, {bounds[1]:+.4g}]"
