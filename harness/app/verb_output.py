"""What `run`, `replay` and `report` print as their result, by --format (table, json, markdown)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from harness.app.commands.options import formatted
from harness.report.brief import WIDTH as BRIEF_WIDTH


def shown_path(path: str | Path) -> str:
    """A path as every verb prints it: relative to the working folder when it lies under it
    (as `-o` and run globs are usually given), else as it is."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def summary_width() -> int:
    """The terminal summary's width: under 100 columns, and under the terminal's when it is
    narrower (an 80-column terminal gets lines of at most 79)."""
    if not sys.stdout.isatty():
        return BRIEF_WIDTH
    return max(60, min(BRIEF_WIDTH, shutil.get_terminal_size((100, 24)).columns - 1))


def print_run(fmt: str, result) -> None:
    """`harness run`'s result. The table was printed per point as it finished (analyze_point);
    json prints one object on stdout: the point's summary.json, or a sweep's {"points": [...]}
    (with sweep.json's frontier and saturation)."""
    if fmt != "json":
        return
    if [p.run_dir for p in result.points] == [result.run_dir]:  # one point, not a sweep
        data: dict = result.points[0].summary
    else:  # sweep.json's frontier and saturation, each point's summary.json in full
        points = [
            {
                "point": p.run_dir.name,
                "run_dir": str(p.run_dir),
                "status": str(p.status),
                **p.summary,
            }
            for p in result.points
        ]
        sweep = {k: v for k, v in result.extra.items() if k != "points"}
        data = {"run_dir": str(result.run_dir), **sweep, "points": points}
    print(json.dumps(data, indent=2))


def print_replay(fmt: str, result, run_dir: str) -> None:
    """`harness replay`'s result: one line on stderr (table), fenced on stdout (markdown), or one
    JSON object on stdout."""
    if fmt == "json":
        print(formatted(fmt, "", replay_data(result, run_dir)))
        return
    lines = replay_lines(result, run_dir)
    if fmt == "markdown":
        print(formatted(fmt, "\n".join(lines), None))
        return
    for line in lines:
        print(line, file=sys.stderr)


def replay_data(result, run_dir: str) -> dict:
    return {
        "status": str(result.status),
        "stopped_by": result.stopped_by,
        "requests": result.requests,
        "by_status": dict(result.by_status),
        "sessions_started": result.sessions_started,
        "duration_s": round(result.duration_s, 3),
        "run_dir": str(Path(run_dir)),
        "errors_by_class": dict(result.errors_by_class),
        "unsent": result.unsent,
    }


def replay_lines(result, run_dir: str) -> list[str]:
    by = ", ".join(f"{k} {v}" for k, v in sorted(result.by_status.items())) or "none"
    ended = result.stopped_by or "?"
    if result.stopped_by == "max_duration" and result.unsent:
        ended += f", {result.unsent} of the trace's requests unsent"
    lines = [
        f"harness: {result.status} ({ended}): {result.requests} requests ({by}) from "
        f"{result.sessions_started} sessions in {result.duration_s:.1f}s -> {run_dir}"
    ]
    if result.errors_by_class:
        reasons = ", ".join(
            f"{k} {v}" for k, v in sorted(result.errors_by_class.items(), key=lambda kv: -kv[1])
        )
        lines.append(f"harness: failures by reason: {reasons}")
    return lines


def print_report(fmt: str, data: dict, lines: list[str]) -> None:
    """`harness report`'s result: what it wrote (and a trend's regressions), as lines or JSON."""
    print(formatted(fmt, "\n".join(lines), data))
