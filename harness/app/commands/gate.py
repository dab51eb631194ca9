"""`harness gate`: a regression verdict from repeated, interleaved runs (or against history), and
`harness gate --calibrate`: the gate's own false-alarm and detection rates on this machine."""

from __future__ import annotations

import argparse
import fnmatch
import glob
import os
import sys
from functools import partial
from pathlib import Path

from harness.analysis.host_state import MAX_LOAD_PER_CPU, MAX_WAIT_SHARE
from harness.app.commands.options import (
    add_export_flags,
    add_fail_on,
    add_format,
    add_output,
    add_quiet,
    add_sets,
    formatted,
    printer,
)
from harness.app.exporting import exports, mlflow_at_end
from harness.app.gate.rule import DEFAULT_FAIL_ON, DEFAULT_MAX_RUNS, DEFAULT_MIN_RUNS
from harness.errors import InputError


def register(sub) -> None:
    p = sub.add_parser(
        "gate",
        help="regression verdict: baseline and candidate run interleaved until decisive",
        description="Run a baseline and a candidate configuration interleaved (a1 b1, b2 a2, ...) "
        "or, with --history and no candidate, today's runs against earlier ones, until the "
        "verdict is decisive or the budget is spent. Runs on a busy host are left out and run "
        "again. A --history glob that matches nothing yet, but would match this gate's runs, "
        "makes this the first run of the history: its runs are recorded, nothing is judged "
        "(exit 0). Against earlier gates' runs tonight is judged night against night: one look "
        "at --min-runs usable runs; one earlier night decides nothing (exit 4). Writes DIR/a1, DIR/b1, ... and DIR/gate.json, DIR/gate.md. Exit 0 no change "
        "detected or history recorded, 1 regressed, 4 inconclusive (rerun), 5 not comparable "
        "(the load, trace or configuration differs from the history), 2 bad input, 130 "
        "interrupted. "
        "--calibrate measures this rule's false-alarm and detection rates instead.",
    )
    p.add_argument("scenario", help="the baseline scenario YAML (or the only one, with --history)")
    p.add_argument("candidate", nargs="?", help="the candidate scenario (default: the baseline)")
    _add_sides(p)
    _add_rule(p)
    _add_screen(p)
    _add_calibration(p)
    add_quiet(p, "only the verdict lines")
    add_export_flags(p)
    add_format(p, "gate.json's content (progress lines go to stderr)")
    p.set_defaults(func=_gate)


def _add_sides(p: argparse.ArgumentParser) -> None:
    """What is compared: the overrides of both sides and the candidate's, or a history."""
    add_sets(p, "override a field on both sides (repeatable)")
    add_sets(
        p,
        "override a field on the candidate only (repeatable)",
        flag="--candidate-set",
        dest="candidate_sets",
    )
    p.add_argument(
        "--history",
        action="append",
        default=[],
        metavar="GLOB",
        help="earlier runs to judge one configuration against (e.g. 'results/nightly-*/b*'; "
        "an earlier gate's runs count as one night)",
    )
    add_output(p, "a new folder for the runs and gate.json", required=True, metavar="DIR")


def _add_rule(p: argparse.ArgumentParser) -> None:
    """The rule: what fails, how many runs, the budget, the error rate and the smallest change."""
    add_fail_on(p, "the regressions that fail the gate (default: %(default)s)", DEFAULT_FAIL_ON)
    p.add_argument(
        "--min-runs",
        type=int,
        default=DEFAULT_MIN_RUNS,
        help="usable pairs (both runs usable; history mode: candidate runs) before a verdict "
        "(%(default)s)",
    )
    p.add_argument(
        "--max-runs",
        type=int,
        default=DEFAULT_MAX_RUNS,
        help="runs a side at most, busy ones included (%(default)s)",
    )
    p.add_argument(
        "--budget-min",
        type=float,
        default=None,
        metavar="MIN",
        help="start no run once this many minutes are spent",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="the false-alarm rate all looks together may spend (0.05)",
    )
    p.add_argument(
        "--min-change",
        type=float,
        default=None,
        help="smallest relative change called significant (the verdict's default)",
    )


def _add_screen(p: argparse.ArgumentParser) -> None:
    """The host screen: when a run is left out as run on a busy host."""
    p.add_argument(
        "--max-host-load",
        type=float,
        default=MAX_LOAD_PER_CPU,
        metavar="X",
        help="a run without a wait share (no schedstat) is left out when other work's load "
        "per CPU passed X (%(default)s)",
    )
    p.add_argument(
        "--max-wait-share",
        type=float,
        default=MAX_WAIT_SHARE,
        metavar="X",
        help="leave a run out when its threads waited for a CPU more than this share of the "
        "time they wanted one (%(default)s)",
    )


def _add_calibration(p: argparse.ArgumentParser) -> None:
    """The calibration quoted, or (--calibrate) measured instead of a verdict."""
    p.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="a calibration.json, or a folder of them, to quote the one that measured this gate's "
        "rule, runner, target and scenario (default: RESULTS/calibrations/)",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="measure the rule's false-alarm rate (A/A) and its detection rate at "
        "step_time_scale 1.1 and 1.3 on SCENARIO; writes DIR/calibration.json",
    )
    p.add_argument(
        "--comparisons",
        type=int,
        default=10,
        help="--calibrate: comparisons of each kind in each direction (10)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="--calibrate: DIR holds an earlier calibration's cycles; run only the rest",
    )


def _gate(args: argparse.Namespace) -> int:
    from harness.app.gate.rule import Rule

    if args.calibrate and (args.metrics_port is not None or args.mlflow_tracking_uri):
        from harness.errors import InputError

        raise InputError(
            "--metrics-port and --mlflow-tracking-uri watch and log a gate's runs, "
            "not a calibration's",
            field="--calibrate",
        )
    resume = args.calibrate and args.resume and (Path(args.output) / "cycles.json").is_file()
    rule = Rule(args.min_runs, args.max_runs, args.alpha, args.fail_on, args.min_change)
    if args.calibrate:
        return _calibrate(args, rule, Path(args.output) if resume else _new_folder(args.output))
    arms, history = _arms(args), _history(args.history, Path(args.output))  # before any folder
    return _judge(args, rule, _new_folder(args.output), arms, history)


def _new_folder(output: str) -> Path:
    out = Path(output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("already exists and is not empty; choose another with -o", path=out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _arms(args: argparse.Namespace) -> dict:
    from harness.app.scenario import load_scenario

    base = load_scenario(args.scenario, args.sets)
    paired = args.candidate is not None or bool(args.candidate_sets)
    if not paired and not args.history:
        raise InputError(
            "nothing to judge against: give a CANDIDATE scenario, --candidate-set "
            "KEY=VALUE, or --history GLOB"
        )
    cand = load_scenario(args.candidate or args.scenario, [*args.sets, *args.candidate_sets])
    for s in (base, cand):
        if s.sweep:
            raise InputError("a gate runs one point; this scenario sweeps", field="sweep")
    if paired:
        for part in ("workload", "load"):
            if getattr(base, part) != getattr(cand, part):
                raise InputError(
                    f"the candidate's {part} differs from the baseline's: the "
                    "runs would not be comparable",
                    field=part,
                )
    return {"a": base, "b": cand} if paired else {"b": cand}


def _judge(args: argparse.Namespace, rule, out: Path, arms: dict, history: list[Path]) -> int:
    from harness.app.gate.calibrations import calibration_key, candidates, quoted
    from harness.app.gate.loop import Budget, gate, run_arm, write_gate
    from harness.report.gate import verdict_lines

    given = Path(args.calibration) if args.calibration else None
    if given is not None and not given.exists():
        raise InputError("no such calibration file or folder", path=given)
    key = calibration_key(arms.get("a", arms["b"]), rule)
    calibration, why_none = quoted(key, candidates(given, Path(arms["b"].results_dir)))
    to_stderr = args.format == "json"  # stdout holds the one JSON object
    say = (lambda _line: None) if args.quiet else printer(to_stderr)
    with exports(args) as live:
        result = gate(
            arms, out, rule=rule, history=history, budget=Budget(args.budget_min),
            screen=_screen(args), say=say, bar=not args.quiet and sys.stderr.isatty(),
            run=partial(run_arm, live=live),
        )  # fmt: skip
    path = write_gate(result, out, calibration, why_none)
    mlflow_at_end(args, [Path(r.path) for r in result.runs])
    doc = result.to_json(calibration, why_none)
    lines = verdict_lines(doc)
    print(formatted(args.format, "\n".join(lines), doc))
    print(f"wrote {path}", file=sys.stderr)
    return 130 if result.stopped_by == "interrupted" else result.exit_code


def _history(patterns: list[str], out: Path) -> list[Path]:
    """The --history runs. A glob that matches nothing yet is a first night when it would match
    this gate's own runs (they become the history); else it is a mistake said before any run."""
    from harness.analysis.loader import expand_run_dirs

    found: list[Path] = []
    for pattern in patterns:
        if glob.has_magic(pattern) and not glob.glob(pattern):
            if not _would_match(pattern, out / "b1"):
                raise InputError(
                    f"{pattern!r} matches no run folder, and would not match this gate's own runs "
                    f"({out / 'b1'}): no later gate would find a history either (e.g. "
                    f"--history '{out.parent}/*/b*')",
                    field="--history",
                )
            continue
        found += expand_run_dirs([pattern])
    return found


def _would_match(pattern: str, path: Path) -> bool:
    """Whether `path` is a match of the glob `pattern` (each part by fnmatch, as glob does)."""
    want = Path(os.path.abspath(pattern)).parts
    have = Path(os.path.abspath(path)).parts
    return len(want) == len(have) and all(
        fnmatch.fnmatch(h, w) for h, w in zip(have, want, strict=True)
    )


def _screen(args: argparse.Namespace):
    from harness.analysis.host_state import Screen

    if not 0 < args.max_wait_share <= 1:
        raise InputError(f"must be in (0, 1], got {args.max_wait_share}", field="--max-wait-share")
    return Screen(args.max_wait_share, args.max_host_load)


def _calibrate(args: argparse.Namespace, rule, out: Path) -> int:
    from harness.app.gate.calibration import calibrate
    from harness.app.gate.calibrations import install
    from harness.app.scenario import load_scenario
    from harness.report.gate import calibration_line

    scenario = load_scenario(args.scenario, args.sets)
    say = (lambda _line: None) if args.quiet else (lambda line: print(line, flush=True))
    doc, path = calibrate(
        scenario,
        out,
        rule=rule,
        comparisons=args.comparisons,
        screen=_screen(args),
        say=say,
    )
    print(calibration_line(doc))
    installed = install(path, Path(scenario.results_dir))
    print(f"wrote {path} (and {installed}, which `harness gate` quotes)", file=sys.stderr)
    return 130 if doc.get("interrupted") else 0
