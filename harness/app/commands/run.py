"""`harness run SCENARIO`, `harness simulate SCENARIO` and `harness replay TRACE`.

Both `run` and `replay` run a scenario: `replay`'s flags are overrides onto one (external
endpoints, a trace file), so the two verbs share one set of defaults, the scenario's.
`harness capacity` and `harness plan pd` are in harness/app/commands/capacity.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.app.commands.options import (
    add_export_flags,
    add_format,
    add_output,
    add_quiet,
    add_sets,
    add_verbose,
    formatted,
)
from harness.app.exporting import exports, mlflow_at_end


def register(sub) -> None:
    run = sub.add_parser(
        "run",
        help="run a scenario: trace, engine, replay, analysis, report",
        description="Run a scenario file end to end: generate or load the trace, start the bundled "
        "engine if asked, replay, analyze, write report.html, print the summary, and stop "
        "everything it started (also on Ctrl-C). A sweep runs one sub-folder per point.",
    )
    run.add_argument("scenario", help="scenario YAML (see scenarios/)")
    add_sets(run, "override any scenario field, e.g. load.concurrency=8 (repeatable)")
    add_output(run, "run folder (default: results/<timestamp>-<scenario>-<id>)")
    add_quiet(run, "no progress display or summary table")
    run.add_argument(
        "--workers",
        type=int,
        default=None,
        help="shard the replay over N Ray workers (sets execution.backend=ray)",
    )
    run.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster address for --workers (default: auto, a local cluster)",
    )
    run.add_argument(
        "--validate-only", action="store_true", help="load and check the scenario, then exit"
    )
    _add_max_failures(run)
    add_export_flags(run)
    add_format(run, 'the point\'s summary.json ({"points": [...]} for a sweep)')
    add_verbose(run)
    run.scenario_fields = scenario_fields()
    run.set_defaults(func=_run)

    _register_simulate(sub)
    _register_replay(sub)


# What `harness simulate` sets before the user's --set: the simulated runner on a virtual clock.
SIMULATE_SETS = ("target.engine.options.runner=simulated", "target.engine.options.clock=virtual")


def _register_simulate(sub) -> None:
    sim = sub.add_parser(
        "simulate",
        help="run a scenario on simulated time: the simulated runner on a virtual clock",
        description="`harness run` with target.engine.options.runner=simulated and clock=virtual: "
        "the driver and the in-process engines run in this process on a clock that jumps to "
        "the next event, so a run takes its modelled time, not the host's, in a fraction of it. "
        "Writes the same run folder (manifest clock: virtual). Timings are modelled, not measured.",
    )
    sim.add_argument("scenario", help="scenario YAML with an in-process engine target")
    add_sets(sim, "override any scenario field (after the two the verb sets; repeatable)")
    add_output(sim, "run folder (default: as `harness run`)")
    add_quiet(sim, "no progress display or summary table")
    _add_max_failures(sim)
    add_export_flags(sim)
    add_format(sim, 'the point\'s summary.json ({"points": [...]} for a sweep)')
    add_verbose(sim)
    sim.scenario_fields = scenario_fields()
    sim.set_defaults(func=_run, workers=None, ray_address=None, validate_only=False, simulate=True)


def scenario_fields() -> dict[str, str]:
    """`harness replay`'s flags and the scenario field each sets: for a "use --set" hint."""
    from harness.app.flags import FLAGS

    return {f.option: f.field for f in FLAGS}


def _add_max_failures(parser) -> None:
    parser.add_argument(
        "--max-failures",
        type=_fraction,
        default=1.0,
        metavar="F",
        help="exit 1 when more than this share (0..1) of measured requests failed (1: only when "
        "none succeeded); exit codes: docs/driver.md",
    )


def _fraction(text: str) -> float:
    value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a share from 0 to 1 (or 0% to 100%), got {text}")
    return value


def _exit(status: str, total: int, failed: int, max_failures: float) -> int:
    from harness.exit_codes import judge

    code, why = judge(status, total, failed, max_failures)
    if why is not None:
        print(f"harness: exit {code}: {why}", file=sys.stderr)
    return code


def _register_replay(sub) -> None:
    from harness.app import flags

    p = sub.add_parser(
        "replay",
        help="replay a trace against OpenAI-compatible endpoints",
        formatter_class=flags.HelpFormatter,
        description="Replay a trace's sessions against one or more OpenAI-compatible endpoints and "
        "write one record per request to RUN_DIR/records.jsonl, plus RUN_DIR/manifest.json. "
        "Every flag overrides one scenario field; defaults are the scenario's. "
        "Exit codes (the same for `harness run`): 0 done; 1 no measured request succeeded, an "
        "empty measured window, or failures above --max-failures; 2 bad input, a failed "
        "preflight or a failed write; 3 partial or not closed; 130 interrupted. See docs/driver.md.",
    )
    p.add_argument("trace", help="trace file (native JSONL, Mooncake or Weka/AgentX; detected)")
    add_output(
        p, "run folder to create (must not hold records yet)", required=True, metavar="RUN_DIR"
    )
    flags.add_flags(p)
    add_quiet(p, "no live progress display (it is also off when stderr is not a terminal)")
    _add_max_failures(p)
    add_export_flags(p)
    add_format(p, "status, stopped_by, requests, by_status, sessions, duration_s, run_dir")
    p.set_defaults(func=_replay)


def replay_scenario(args: argparse.Namespace):
    """The scenario `harness replay` runs: its flags, then its --set items, onto the defaults."""
    from harness.app import flags
    from harness.app import scenario as sc
    from harness.errors import InputError, ScenarioError

    if not any(item.startswith("target.model=") for item in args.sets):
        flags.require_model(args)
    doc = flags.scenario_doc(args)
    sets = [sc.parse_set(item) for item in args.sets]
    for key, value in sets:
        sc.set_path(doc, key, value)
    try:
        return sc.validate(doc, source="harness replay", overrides=tuple(k for k, _ in sets))
    except ScenarioError as exc:
        flag = flags.flag_of(exc.field or "")
        if flag is None:
            raise
        raise InputError(exc.reason, field=f"{flag} ({exc.field})") from None


def _replay(args: argparse.Namespace) -> int:
    from harness.app.build import build_trace
    from harness.app.runner import replay_point
    from harness.driver.live import progress
    from harness.driver.live.signals import interrupt_on_signals

    scenario = replay_scenario(args)
    with interrupt_on_signals():
        trace = build_trace(scenario)
    t = scenario.target
    if scenario.load.history == "live" and t.api == "completions" and t.prompt_format == "tokens":
        print(
            "harness: note: --history live keeps recorded outputs in token-id prompts",
            file=sys.stderr,
        )
    with exports(args) as live:
        result = replay_point(
            scenario, trace, Path(args.output), show_progress=progress.wanted(args.quiet), live=live
        )
    mlflow_at_end(args, [Path(args.output)])
    from harness.app.verb_output import print_replay

    print_replay(args.format, result, args.output)
    from harness.exit_codes import measured_counts

    total, failed = measured_counts(Path(args.output))
    return _exit(str(result.status), total, failed, args.max_failures)


def _run(args: argparse.Namespace) -> int:
    from harness.app.runner import run_scenario, summary_line
    from harness.app.scenario import load_scenario

    sets = [*SIMULATE_SETS, *args.sets] if getattr(args, "simulate", False) else list(args.sets)
    if args.workers is not None:
        sets += ["execution.backend=ray", f"execution.workers={args.workers}"]
    if args.ray_address is not None:
        sets.append(f"execution.address={args.ray_address}")
    scenario = load_scenario(args.scenario, sets)
    if args.validate_only:
        _check_tokenizers(scenario)
        points = len(scenario.points())
        data = {"scenario": args.scenario, "ok": True, "points": points}
        print(formatted(args.format, f"{args.scenario}: ok ({points} point(s))", data))
        return 0
    from contextlib import nullcontext, redirect_stdout

    from harness.app.verb_output import print_run

    json_out = args.format == "json"  # stdout holds the one JSON object; the rest goes to stderr
    with redirect_stdout(sys.stderr) if json_out else nullcontext():
        with exports(args) as live:
            result = run_scenario(
                scenario,
                out=args.output,
                quiet=args.quiet,
                fmt=args.format,
                live=live,
                verbose=args.verbose,
            )
        print(summary_line(result))
        mlflow_at_end(args, [p.run_dir for p in result.points])
    print_run(args.format, result)
    codes = [
        _exit(
            str(p.status),
            p.summary.get("requests_total", 0) - p.summary.get("requests_cancelled", 0),
            p.summary.get("requests_failed", 0),
            args.max_failures,
        )
        for p in result.points
    ]
    return max(codes, default=0)


def _check_tokenizers(scenario) -> None:
    """Each point's tokenizer loads (an InputError naming the file, or how to install
    `tokenizers`), as the run would load it at its start."""
    from harness.trace.chat_tokens import ChatTokenizer

    for path in {p.workload.tokenizer for _, p in scenario.points()} - {None}:
        ChatTokenizer.load(path)
