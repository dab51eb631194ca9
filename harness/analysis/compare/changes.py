"""Baseline vs run: every headline metric, its change, and whether the change is real.

A change is *significant* when a two-sided Mann-Whitney U test on the per-request distributions
behind the metric gives p < alpha AND the relative change is at least `min_change` (asv's rule:
a test and a size threshold); anything else is shown as `~`. Rates that have no per-request
distribution (TPGS, throughput) are tested on per-window values: each run's measured span cut
into equal windows. Several runs per side (repeats) are pooled. `--fail-on` thresholds fail only
on significant changes, so noise does not break a nightly job.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.stats import mannwhitneyu

from harness.analysis.compare.sides import HEADLINE, Side
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
    p_value: float | None
    significant: bool
    verdict: str  # "~" (not significant), "better", "worse"
    n_baseline: int
    n_run: int


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
) -> CompareResult:
    base = [analyze(r) for r in load_runs(_as_list(baseline_dirs))]
    cand = [analyze(r) for r in load_runs(_as_list(run_dirs))]
    return compare_analyses(base, cand, fail_on=fail_on, alpha=alpha, min_change=min_change)


def compare_analyses(
    baseline: list,
    run: list,
    fail_on: str | None = None,
    alpha: float = 0.01,
    min_change: float = 0.02,
) -> CompareResult:
    """`compare_runs` on runs already analyzed (the report compares the runs it shows)."""
    thresholds = parse_fail_on(fail_on)
    base, cand = Side(baseline), Side(run)
    rows = [_change(metric, base, cand, alpha, min_change) for metric in HEADLINE]
    by_key = {r.key: r for r in rows}
    failures = [
        f"{t.key} {by_key[t.key].baseline:.4g} -> {by_key[t.key].run:.4g} ({_fmt_change(by_key[t.key])})"
        f" crosses {t} (p={by_key[t.key].p_value:.2g})"
        for t in thresholds
        if t.crossed(by_key[t.key])
    ]
    return CompareResult(
        baseline=base.names,
        run=cand.names,
        counts={"baseline": base.counts(), "run": cand.counts()},
        rows=rows,
        thresholds=[str(t) for t in thresholds],
        failures=failures,
        alpha=alpha,
        min_change=min_change,
        notes=import_notes([*baseline, *run]),
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


def _change(metric, base: Side, cand: Side, alpha: float, min_change: float) -> MetricChange:
    b, r = metric.value(base), metric.value(cand)
    xb, xr = metric.samples(base), metric.samples(cand)
    change = (r - b) / abs(b) if b not in (None, 0) and r is not None else None
    p = _p_value(xb, xr)
    # From a zero baseline (no errors) any change is large enough; the test still decides.
    large = abs(change) >= min_change if change is not None else (b == 0 and r not in (None, 0))
    significant = p is not None and p < alpha and large
    verdict = "~"
    if significant:
        worse = ((r - b) > 0) == (metric.better == "lower")
        verdict = "worse" if worse else "better"
    return MetricChange(
        metric.key,
        metric.label,
        metric.better,
        b,
        r,
        change,
        p,
        significant,
        verdict,
        len(xb),
        len(xr),
    )


def _p_value(a: np.ndarray, b: np.ndarray) -> float | None:
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 3 or len(b) < 3:
        return None  # too few values to test: never called significant
    if np.ptp(np.concatenate([a, b])) == 0:
        return 1.0
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def _fmt_change(row: MetricChange) -> str:
    return "n/a" if row.change is None else f"{row.change * 100:+.1f}%"
