"""`harness capacity SCENARIO` and `harness plan pd`: capacity planning, flags in, one call each.

The wall-clock search is harness/app/capacity/search.py; `--simulate` and its flags are
harness/app/commands/fleet.py; `plan pd` reads two saturation runs (harness/app/sweep.py).
"""

from __future__ import annotations

import argparse
import sys

from harness.analysis.host_state import MAX_LOAD_PER_CPU, MAX_WAIT_SHARE
from harness.app.commands import fleet as fleet_commands
from harness.app.commands.options import add_format, add_output, add_sets, formatted, printer


def register(sub) -> None:
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
    add_sets(cap, "override any scenario field (repeatable)")
    add_output(cap, "the folder for capacity.json and the runs", required=True)
    _add_search(cap)
    _add_screen(cap)
    fleet_commands.add_arguments(cap)  # --simulate, --replicas, --routing: the virtual clock's
    add_format(cap, "capacity.json's content (fleet.json's with --replicas); progress on stderr")
    cap.set_defaults(func=_capacity)


def _add_search(cap: argparse.ArgumentParser) -> None:
    """The search: how far, how fine, how many runs a point."""
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


def _add_screen(cap: argparse.ArgumentParser) -> None:
    """The busy-host screen and the budget."""
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


def _capacity(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.app.capacity.search import CAPACITY_FILE, capacity
    from harness.app.scenario import load_scenario
    from harness.errors import InputError
    from harness.report.capacity_text import notes

    if args.simulate or _virtual(args):  # the exact search (harness/app/capacity/virtual.py)
        from harness.app.commands.fleet import simulate_capacity

        return simulate_capacity(args)
    settings = _capacity_settings(args)
    out = Path(args.output)
    if out.exists() and any(out.iterdir()):
        raise InputError("already exists and is not empty; choose another with -o", path=out)
    from harness.driver.runfolder import make_run_dir

    make_run_dir(out)
    scenario = load_scenario(args.scenario, args.sets)
    as_json = args.format == "json"  # stdout holds the one JSON object; progress goes to stderr
    say = printer(as_json)
    result = capacity(scenario, out, settings, say=say, bar=sys.stderr.isatty())
    lines = [result["band_text"], result["binding_text"], *notes(result)]
    print(formatted(args.format, "\n".join(f"capacity: {line}" for line in lines), result))
    print(f"wrote {out / CAPACITY_FILE} and {out / 'capacity.html'}", file=sys.stderr)
    return 0


def _virtual(args: argparse.Namespace) -> bool:
    """Whether the scenario, --set included, runs on the virtual clock: its figures are the cost
    model's, exactly, so the exact search runs (one run a point), not the wall clock's repeats."""
    from harness.app.build import virtual_clock
    from harness.app.scenario import load_scenario

    return virtual_clock(load_scenario(args.scenario, args.sets))


def _capacity_settings(args: argparse.Namespace):
    from harness.analysis.capacity import Rule
    from harness.app.capacity.search import Settings
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


def _plan_pd(args: argparse.Namespace) -> int:
    from harness.analysis.sweep import plan_pd

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
