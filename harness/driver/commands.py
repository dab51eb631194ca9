"""`harness replay`: replay a trace against OpenAI-compatible endpoints into a run folder."""

from __future__ import annotations

import argparse
import sys

from harness.driver import flags

EXIT_INTERRUPTED = 130


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a trace against OpenAI-compatible endpoints",
        description="Replay a trace's sessions against one or more OpenAI-compatible endpoints and "
        "write one record per request to RUN_DIR/records.jsonl, plus RUN_DIR/manifest.json. "
        "Exit 0 when the run completes (failed requests are records, counted in the summary), "
        "1 when every request failed, 2 on bad input or an endpoint that cannot be reached, "
        "130 when interrupted (Ctrl-C / SIGTERM). See docs/driver.md.",
    )
    p.add_argument("trace", help="trace file (native JSONL, Mooncake or Weka/AgentX; detected)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="RUN_DIR",
        help="run folder to create (must not hold records yet)",
    )
    flags.add_target_flags(p)
    flags.add_load_flags(p)
    flags.add_content_flags(p)
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no live progress display (it is also off when stderr is not a terminal)",
    )
    p.set_defaults(func=_handle)


def _handle(args: argparse.Namespace) -> int:
    from harness.driver import progress
    from harness.driver.run import replay_blocking

    config = flags.build_config(args)
    trace = flags.load_trace_arg(args)
    target = flags.build_target(args, trace, config)
    if (
        config.history == "live"
        and config.api == "completions"
        and config.prompt_format == "tokens"
    ):
        print(
            "harness: note: --history live keeps recorded outputs in token-id prompts",
            file=sys.stderr,
        )
    result = replay_blocking(
        trace,
        target,
        config,
        args.output,
        trace_path=args.trace,
        show_progress=progress.wanted(args.quiet),
    )
    _print_summary(result, args.output)
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    return 1 if result.requests and not result.by_status.get("ok") else 0


def _print_summary(result, run_dir: str) -> None:
    by = ", ".join(f"{k} {v}" for k, v in sorted(result.by_status.items())) or "none"
    line = f"harness: {result.status}: {result.requests} requests ({by}) from {result.sessions_started} sessions in {result.duration_s:.1f}s -> {run_dir}"
    print(line, file=sys.stderr)
    if result.errors_by_class:
        reasons = ", ".join(
            f"{k} {v}" for k, v in sorted(result.errors_by_class.items(), key=lambda kv: -kv[1])
        )
        print(f"harness: failures by reason: {reasons}", file=sys.stderr)
