"""`harness run SCENARIO`, `harness replay TRACE`, `harness capacity SCENARIO` and `harness plan pd`.

Both `run` and `replay` run a scenario: `replay`'s flags are overrides onto one (external
endpoints, a trace file), so the two verbs share one set of defaults, the scenario's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.analysis.host_state import MAX_LOAD_PER_CPU, MAX_WAIT_SHARE
from harness.app.parser import add_format, formatted


def register(sub) -> None:
    run = sub.add_parser(
        "run",
        help="run a scenario: trace, engine, replay, analysis, report",
        description="Run a scenario file end to end: generate or load the trace, start the bundled "
        "engine if asked, replay, analyze, write report.html, print the summary, and stop "
        "everything it started (also on Ctrl-C). A sweep runs one sub-folder per point.",
    )
    run.add_argument("scenario", help="scenario YAML (see scenarios/)")
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any scenario field, e.g. load.concurrency=8 (repeatable)",
    )
    run.add_argument(
        "-o",
        "--output",
        default=None,
        help="run folder (default: results/<timestamp>-<scenario>-<id>)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress display or summary table")
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
    add_format(run, 'the point\'s summary.json ({"points": [...]} for a sweep)')
    run.set_defaults(func=_run)

    _register_simulate(sub)
    _register_replay(sub)
    _register_capacity(sub)

    plan = sub.add_parser("plan", help="capacity planning from saturation runs")
    tools = plan.add_subparsers(dest="plan_verb", metavar="PLAN")
    tools.required = True
    pd = tools.add_parser(
        "pd",
        help="prefill-to-decode instance ratio from two saturation runs",
        description="P/D = decode_rate / prefill_rate (requests/s at saturation). RUN_A is the "
        "prefill-only run (or sweep folder), RUN_B the decode-only one.",
    )
    pd.add_argument("prefill_run", metavar="RUN_A")
    pd.add_argument("decode_run", metavar="RUN_B")
    add_format(pd)
    pd.set_defaults(func=_plan_pd)


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
    sim.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any scenario field (after the two the verb sets; repeatable)",
    )
    sim.add_argument("-o", "--output", default=None, help="run folder (default: as `harness run`)")
    sim.add_argument("--quiet", action="store_true", help="no progress display or summary table")
    _add_max_failures(sim)
    add_format(sim, 'the point\'s summary.json ({"points": [...]} for a sweep)')
    sim.set_defaults(func=_run, workers=None, ray_address=None, validate_only=False, simulate=True)


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


def _register_capacity(sub) -> None:
    cap = sub.add_parser(
        "capacity",
        help="the most concurrent tasks the target serves within the scenario's SLOs, as a band",
        description="Search load.concurrency (1, 2, 4, ... then bisection) for the most concurrent "
        "tasks whose SLOs (the scenario's slos) all hold. Each run's figure is one sample: a point "
        "clear of its bounds is decided by one run, a point near them by --repeats runs and the "
        "share that met. Writes capacity.json (capacity and band) and capacity.html.",
    )
    cap.add_argument("scenario", help="scenario YAML with percentile slos (e.g. ttft_p90: 1s)")
    cap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    cap.add_argument(
        "-o", "--output", required=True, help="the folder for capacity.json and the runs"
    )
    cap.add_argument("--max-concurrency", type=int, default=256, help="stop doubling here")
    cap.add_argument(
        "--resolution",
        type=float,
        default=0.1,
        help="stop bisecting once the gap is this fraction of the answer (0.1)",
    )
    cap.add_argument(
        "--repeats", type=int, default=3, help="runs of a point near the knee, at least 2 (3)"
    )
    cap.add_argument(
        "--max-runs",
        type=int,
        default=5,
        help="runs of one point at most: busy-host repeats, non-monotone re-runs (5)",
    )
    cap.add_argument(
        "--min-tasks",
        type=int,
        default=5,
        help="a run that served fewer tasks is undecided, never met (5)",
    )
    cap.add_argument(
        "--near",
        type=float,
        default=0.2,
        help="a figure within this share of its bound is near the knee: repeats decide (0.2)",
    )
    cap.add_argument(
        "--max-wait-share",
        type=float,
        default=MAX_WAIT_SHARE,
        help="a run whose threads waited for a CPU more than this share of the time is on a busy "
        "host (%(default)s; the gate's screen)",
    )
    cap.add_argument(
        "--busy-load",
        type=float,
        default=MAX_LOAD_PER_CPU,
        help="without a wait share (no schedstat): other processes' load average per CPU from "
        "which a run's host is busy (%(default)s; the gate's --max-host-load)",
    )
    cap.add_argument(
        "--budget-min",
        type=float,
        default=20.0,
        help="wall-clock minutes for the whole search; optional runs (busy-host repeats, "
        "re-runs, the look above) only in the first 60 %% of it (20)",
    )
    cap.add_argument(
        "--no-look-above",
        dest="look_above",
        action="store_false",
        help="do not try the point above the first miss (it detects non-monotone curves)",
    )
    from harness.app import fleet_commands  # --simulate, --replicas, --routing: the virtual clock's

    fleet_commands.add_arguments(cap)
    cap.set_defaults(func=_capacity)


def _capacity(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.app.capacity import CAPACITY_FILE, capacity
    from harness.app.scenario import load_scenario
    from harness.errors import InputError
    from harness.report.capacity_text import notes

    if args.simulate:  # the exact search on the virtual clock (harness/app/capacity_virtual.py)
        from harness.app.fleet_commands import simulate_capacity

        return simulate_capacity(args)
    settings = _capacity_settings(args)
    out = Path(args.output)
    if out.exists() and any(out.iterdir()):
        raise InputError("already exists and is not empty; choose another with -o", path=out)
    from harness.driver.runfolder import make_run_dir

    make_run_dir(out)
    scenario = load_scenario(args.scenario, args.sets)
    result = capacity(scenario, out, settings)
    print(f"capacity: {result['band_text']}")
    print(f"capacity: {result['binding_text']}")
    for line in notes(result):
        print(f"capacity: {line}")
    print(f"wrote {out / CAPACITY_FILE} and {out / 'capacity.html'}")
    return 0


def _capacity_settings(args: argparse.Namespace):
    from harness.analysis.capacity import Rule
    from harness.app.capacity import Settings
    from harness.errors import InputError

    checks = (
        ("--max-concurrency", args.max_concurrency, args.max_concurrency >= 1, ">= 1"),
        ("--repeats", args.repeats, args.repeats >= 2, ">= 2"),
        ("--max-runs", args.max_runs, args.max_runs >= args.repeats, ">= --repeats"),
        ("--min-tasks", args.min_tasks, args.min_tasks >= 1, ">= 1"),
        ("--near", args.near, 0 <= args.near < 1, "in [0, 1)"),
        ("--resolution", args.resolution, 0 <= args.resolution < 1, "in [0, 1)"),
        ("--busy-load", args.busy_load, args.busy_load > 0, "> 0"),
        ("--max-wait-share", args.max_wait_share, 0 < args.max_wait_share <= 1, "in (0, 1]"),
        ("--budget-min", args.budget_min, args.budget_min > 0, "> 0"),
    )
    for flag, value, ok, want in checks:
        if not ok:
            raise InputError(f"must be {want}, got {value}", field=flag)
    rule = Rule(
        min_tasks=args.min_tasks,
        repeats=args.repeats,
        near=args.near,
        busy_load=args.busy_load,
        max_runs=args.max_runs,
        max_wait_share=args.max_wait_share,
    )
    budget = args.budget_min * 60
    return Settings(args.max_concurrency, args.resolution, budget, args.look_above, rule)


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
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="RUN_DIR",
        help="run folder to create (must not hold records yet)",
    )
    flags.add_flags(p)
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no live progress display (it is also off when stderr is not a terminal)",
    )
    _add_max_failures(p)
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
    result = replay_point(
        scenario, trace, Path(args.output), show_progress=progress.wanted(args.quiet)
    )
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
        result = run_scenario(scenario, out=args.output, quiet=args.quiet, fmt=args.format)
        print(summary_line(result))
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


def _plan_pd(args: argparse.Namespace) -> int:
    from harness.app.sweep import plan_pd

    plan = plan_pd(args.prefill_run, args.decode_run)
    table = _pd_table(plan)
    print(formatted(args.format, table, plan))
    return 0


def _pd_table(plan: dict) -> str:
    return "\n".join(
        (
            f"prefill rate: {plan['prefill_rate_rps']:.4g} req/s ({plan['prefill_source']})",
            f"decode rate:  {plan['decode_rate_rps']:.4g} req/s ({plan['decode_source']})",
            f"P/D = decode_rate / prefill_rate = {plan['p_to_d']:.3f} prefill instances per"
            " decode instance",
        )
    )
