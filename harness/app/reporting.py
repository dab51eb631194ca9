"""The report pages' composition: load the runs, analyse them, hand the analyses to `report/`.

`harness report`, `harness run` and a sweep call these; `report/` itself only presents the analyses
it is given (docs/architecture.md: presentation never calls the loader or the analyzer).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from harness.atomic import write_atomic
from harness.schema import REPORT_FILE

COMPARE_DIR = "compare"  # pages of several runs, beside the run folders

if TYPE_CHECKING:
    from harness.analysis.compare.trend import Trend
    from harness.analysis.summary_types import Analysis


def write_report(run_dirs, out_path: str | Path | None = None) -> Path:
    """One run: RUN_DIR/report.html. Several: a page of their own in `compare/` beside the first
    run's folder (`compare/A-vs-B.html`), so a comparison never overwrites a run's own report
    and a glob over the run folders (`results/*quickstart*`) never matches it."""
    from harness.analysis.loader import load_runs
    from harness.analysis.summary import analyze

    runs = load_runs([run_dirs] if isinstance(run_dirs, str | Path) else run_dirs)
    return write_analyses([analyze(r) for r in runs], out_path)


def write_analyses(analyses: list[Analysis], out_path: str | Path | None = None) -> Path:
    """The report of analyses already made (a run that has just analysed itself); several runs
    with what sets them side by side (each against the first, their frontier)."""
    from harness.analysis.side_by_side import side_by_side
    from harness.report.html import render_report

    out = Path(out_path) if out_path else default_report_path([a.run.path for a in analyses])
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(out, render_report(analyses, side_by_side(analyses)))


def default_report_path(paths: list[Path]) -> Path:
    if len(paths) == 1:
        return paths[0] / REPORT_FILE
    names = [re.sub(r"[^A-Za-z0-9._-]+", "_", p.resolve().name) for p in paths]
    stem = "-vs-".join(names) if len(names) <= 3 else f"{names[0]}-vs-{len(names) - 1}-runs"
    return paths[0].resolve().parent / COMPARE_DIR / f"{stem[:150]}.html"


def write_trend(
    run_dirs, out_path: str | Path, alpha: float = 0.05, min_change: float = 0.02
) -> tuple[Path, Trend]:
    """`harness report --trend`: trend.html, and each run's own report where it has none yet
    (every point links to it)."""
    from harness.analysis.compare.series_names import series_names
    from harness.analysis.compare.trend import trend
    from harness.report.html import render_report
    from harness.report.trend import render_trend

    result, analyses = trend(run_dirs, alpha, min_change)
    names = series_names(analyses, [p.series for p in result.points])
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    for a in analyses:
        page = a.run.path / REPORT_FILE
        if not page.is_file():
            page.write_text(render_report([a]), encoding="utf-8")
    out.write_text(render_trend(result, out.parent, names), encoding="utf-8")
    return out, result
