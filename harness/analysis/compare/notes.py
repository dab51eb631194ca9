"""What a comparison says once, above its rows: the runs' endings, imports, invalid runs, history."""

from __future__ import annotations

from harness.analysis.compare.changes import MetricChange
from harness.analysis.compare.history import Screened
from harness.analysis.compare.sides import HEADLINE
from harness.analysis.context_limit import invalid_reasons
from harness.analysis.ending import run_ending
from harness.analysis.host_state import busy_reason
from harness.analysis.summary_types import Analysis
from harness.errors import InputError

ONE_RUN = (
    "one run a side and no usable history: changes are shown with the within-run interval, but "
    "cannot be called significant across runs (never 'regressed'); repeat the runs or give --history"
)


def run_notes(
    baseline: list[Analysis],
    candidate: list[Analysis],
    screened: Screened,
    rows: list[MetricChange],
    shared_why_not: str | None,
) -> list[str]:
    both = [*baseline, *candidate]
    out = [f"not comparable: {shared_why_not}"] if shared_why_not else []
    out += _same_runs(baseline, candidate) + import_notes(both) + ending_notes(both)
    out += [
        f"{a.run.name}: {why}; its figures follow the host"
        for a in both
        if (why := busy_reason(a.summary)) is not None
    ]
    out += [f"history: {run} left out: {why}" for run, why in screened.left_out]
    if any(r.band_source and r.band_source.startswith("one run") for r in rows):
        out.append(ONE_RUN)
    return out


def _same_runs(baseline: list[Analysis], candidate: list[Analysis]) -> list[str]:
    paths = {str(a.run.path.resolve()) for a in baseline}
    same = [a.run.name for a in candidate if str(a.run.path.resolve()) in paths]
    return [f"the same run on both sides ({', '.join(same)}): no change can show"] if same else []


def failure_line(r: MetricChange) -> str:
    change = "n/a" if r.change is None else f"{r.change * 100:+.1f}%"
    return (
        f"{r.key} {_num(r.baseline)} -> {_num(r.run)} ({change}) crosses {r.threshold} "
        f"(interval {interval_text(r)}, {r.band_source})"
    )


def _num(x: float | None) -> str:
    """4 significant digits, no e-notation for large figures (30140, not 3.014e+04)."""
    if x is None:
        return "n/a"
    return f"{x:.0f}" if abs(x) >= 1e4 else f"{x:.4g}"


def interval_text(row: MetricChange) -> str:
    """The interval of the change: relative where the baseline is not zero, else absolute."""
    if row.interval is not None:
        return f"[{row.interval[0] * 100:+.1f}%, {row.interval[1] * 100:+.1f}%]"
    if row.interval_abs is not None:
        return f"[{row.interval_abs[0]:+.3g}, {row.interval_abs[1]:+.3g}]"
    return "n/a"


def invalid_notes(analyses: list) -> list[str]:
    """One line per invalid run (analysis/context_limit.py): a gate does not pass it."""
    return [f"{a.run.name} is INVALID: {r}" for a in analyses for r in invalid_reasons(a.summary)]


def measured(rows: list[MetricChange]) -> list[MetricChange]:
    """Every row, less the server-wide ones neither side measured (no spec decoding)."""
    wide = {m.key for m in HEADLINE if m.server_wide}
    return [r for r in rows if r.key not in wide or (r.baseline, r.run) != (None, None)]


def ending_notes(analyses: list) -> list[str]:
    """One line per run that did not end cleanly: how it ended."""
    ended = ((a.run.name, run_ending(a.run.manifest)) for a in analyses)
    return [f"{name}: {note}" for name, note in ended if note]


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
