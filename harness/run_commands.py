"""`harness run SCENARIO` and `harness plan pd`: the main job, from YAML to report."""

from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    run = sub.add_parser(
        "run", help="run a scenario: trace, engine, replay, analysis, report",
        description="Run a scenario file end to end: generate or load the trace, start the bundled "
                    "engine if asked, replay, analyze, write report.html, print the summary, and stop "
                    "everything it started (also on Ctrl-C). A sweep runs one sub-folder per point.")
    run.add_argument("scenario", help="scenario YAML (see scenarios/)")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="override any scenario field, e.g. load.concurrency=8 (repeatable)")
    run.add_argument("-o", "--output", default=None,
                     help="run folder (default: results/<timestamp>-<scenario>-<id>)")
    run.add_argument("--quiet", action="store_true", help="no progress display or summary table")
    run.add_argument("--workers", type=int, default=None,
                     help="shard the replay over N Ray workers (sets execution.backend=ray)")
    run.add_argument("--ray-address", default=None,
                     help="Ray cluster address for --workers (default: auto, a local cluster)")
    run.add_argument("--validate-only", action="store_true", help="load and check the scenario, then exit")
    run.set_defaults(func=_run)

    plan = sub.add_parser("plan", help="capacity planning from saturation runs")
    tools = plan.add_subparsers(dest="plan_verb", metavar="PLAN")
    tools.required = True
    pd = tools.add_parser(
        "pd", help="prefill-to-decode instance ratio from two saturation runs",
        description="P/D = decode_rate / prefill_rate (requests/s at saturation). RUN_A is the "
                    "prefill-only run (or sweep folder), RUN_B the decode-only one.")
    pd.add_argument("prefill_run", metavar="RUN_A")
    pd.add_argument("decode_run", metavar="RUN_B")
    pd.add_argument("--json", action="store_true", help="print one JSON object")
    pd.set_defaults(func=_plan_pd)


def _run(args: argparse.Namespace) -> int:
    from harness.runner import run_scenario, summary_line
    from harness.scenario import load_scenario

    sets = list(args.sets)
    if args.workers is not None:
        sets += ["execution.backend=ray", f"execution.workers={args.workers}"]
    if args.ray_address is not None:
        sets.append(f"execution.address={args.ray_address}")
    scenario = load_scenario(args.scenario, sets)
    if args.validate_only:
        print(f"{args.scenario}: ok ({len(scenario.points())} point(s))")
        return 0
    result = run_scenario(scenario, out=args.output, quiet=args.quiet)
    print(summary_line(result))
    return 130 if result.interrupted else 0


def _plan_pd(args: argparse.Namespace) -> int:
    from harness.sweep import plan_pd

    plan = plan_pd(args.prefill_run, args.decode_run)
    if args.json:
        print(json.dumps(plan, indent=2))
    else:
        print(f"prefill rate: {plan['prefill_rate_rps']:.4g} req/s ({plan['prefill_source']})")
        print(f"decode rate:  {plan['decode_rate_rps']:.4g} req/s ({plan['decode_source']})")
        print(f"P/D = decode_rate / prefill_rate = {plan['p_to_d']:.3f} prefill instances per decode instance")
    return 0
