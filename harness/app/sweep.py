"""A sweep's end: sweep.json, the cross-point report and table (computed in analysis/sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.analysis.sweep import point_row, sweep_summary
from harness.app.reporting import write_report
from harness.report.sweep import render_sweep


def finish_sweep(
    run_dir: Path, results: list, *, params: tuple[str, ...] = (), quiet: bool = False
) -> dict:
    """sweep.json, the cross-point report and table. Saturation only for a one-axis load sweep."""
    rows = [point_row(r.run_dir.name, r.run_dir, r.summary) for r in results]
    out = sweep_summary(rows, params)
    (run_dir / "sweep.json").write_text(json.dumps(out, indent=2) + "\n")
    report = write_report([r.run_dir for r in results], run_dir / "report.html")
    if not quiet:
        print(render_sweep(out))
        print(f"sweep report: {report}")
    return out
