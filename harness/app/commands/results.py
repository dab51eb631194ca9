"""`harness analyze`, `compare`, `report`, `import`: parse flags, call one function each."""

from __future__ import annotations

import argparse
import sys

from harness.app.commands.options import add_fail_on, add_format, add_output, add_verbose, formatted


def register(sub: argparse._SubParsersAction) -> None:
    _register_analyze(sub)
    _register_compare(sub)
    _register_report(sub)
    _register_import(sub)


def _register_analyze(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="compute a run's metrics: summary.json, histograms, a table")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument(
        "--gpus",
        type=float,
        default=None,
        help="GPUs serving the run (default: manifest n_gpus, else 1)",
    )
    p.add_argument(
        "--slo",
        action="append",
        default=None,
        metavar="METRIC=VALUE",
        help="e.g. ttft_p90=2s, tpot=50ms, interactivity_p90=20 (repeatable; default: the scenario's)",
    )
    p.add_argument(
        "--window",
        choices=("phases", "steady"),
        default=None,
        help="the measured window: the driver's phases, or from when load, hit rate and TTFT"
        " hold steady (default: the run's load.window, else phases; docs/metrics.md)",
    )
    p.add_argument(
        "--block-size",
        type=int,
        default=None,
        metavar="TOKENS",
        help="block size of the ideal prefix cache (default: the run's; see docs/metrics.md)",
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        metavar="DIR",
        help="the server's Hugging Face tokenizer folder (tokenizer.json + chat template): chat and "
        "text prompts counted in its tokens (default: the run's tokenizer setting)",
    )
    add_format(p, "summary.json")
    add_verbose(p)
    p.set_defaults(func=_analyze)


def _register_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="baseline vs run: change, significance, CI thresholds")
    p.add_argument(
        "runs", nargs="*", metavar="RUN_DIR", help="BASELINE RUN (or use --baseline/--run)"
    )
    p.add_argument(
        "--baseline",
        action="append",
        default=[],
        help="a baseline run folder or glob (repeatable: pooled)",
    )
    p.add_argument(
        "--run", action="append", default=[], help="a run folder or glob (repeatable: pooled)"
    )
    p.add_argument(
        "--history",
        action="append",
        default=[],
        metavar="GLOB",
        help="earlier runs of the same scenario (e.g. 'results/nightly-*'): their spread is noise",
    )
    add_fail_on(
        p,
        "e.g. 'ttft_p90:+10%%,tpgs:-5%%,cache_hit_rate:-0.02': exit 1 on a significant change past it",
    )
    p.add_argument(
        "--allow-unclosed",
        action="store_true",
        help="let --fail-on judge a run that crashed, was not closed or failed (refused otherwise)",
    )
    add_format(p, "the comparison's rows and verdict")
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="1 - the level of each change's interval across runs (0.05: 95%%)",
    )
    p.add_argument(
        "--min-change",
        type=float,
        default=0.02,
        help="smallest relative change called significant; the threshold of rows --fail-on does"
        " not name",
    )
    p.set_defaults(func=_compare)


def _register_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained report.html (several runs: side by side)"
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folders or globs")
    add_output(
        p,
        "output file (default: one run: RUN_DIR/report.html; several: report-A-vs-B.html beside"
        " the first run's folder, each run's own report untouched; with --trend: trend.html here)",
    )
    p.add_argument(
        "--trend",
        action="store_true",
        help="the key metrics over the runs in run order, one line per series (trace, load, target);"
        " each run judged against the one before it, exit 1/0/4 by the latest run's verdict",
    )
    add_format(p, '{"report": the file written, "runs": [...], ...}')
    p.set_defaults(func=_report)


def _register_import(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="another tool's per-request export as a run folder (aiperf, vllm-bench, guidellm)",
    )
    p.add_argument("tool", choices=("aiperf", "vllm-bench", "guidellm"))
    p.add_argument("source", metavar="PATH", help="the export: a file, or the tool's output folder")
    add_output(p, "the run folder to write (must not hold records)", required=True, metavar="RUN")
    p.add_argument(
        "--benchmark",
        type=int,
        default=None,
        metavar="N",
        help="guidellm: which benchmark of a sweep (0-based)",
    )
    add_format(p, "the imported run's summary.json, with run_dir, tool and source")
    add_verbose(p)
    p.set_defaults(func=_import)


def _analyze(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.analysis.loader import ARROW
    from harness.analysis.summary import analyze_run
    from harness.app.verb_output import summary_width
    from harness.report.brief import brief
    from harness.report.text import summary_table

    if ARROW and Path(args.run_dir).is_dir():  # the [parquet] extra: a typed copy to load fast
        from harness.analysis.parquet import save_records

        skipped = save_records(Path(args.run_dir))
        if skipped:
            print(f"harness: {skipped}", file=sys.stderr)
    summary = analyze_run(
        args.run_dir,
        gpus=args.gpus,
        slos=args.slo,
        block_size=args.block_size,
        tokenizer=args.tokenizer,
        window_mode=args.window,
    )
    table = summary_table(summary) if args.verbose else brief(summary, summary_width())
    print(formatted(args.format, table, summary))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from harness.analysis.compare.verdict import compare_runs
    from harness.errors import InputError
    from harness.report.compare import render

    baseline, run = list(args.baseline), list(args.run)
    positional = list(args.runs)
    if not baseline and positional:
        baseline.append(positional.pop(0))
    run.extend(positional)
    if not baseline or not run:
        raise InputError(
            "give a baseline and a run: harness compare BASELINE RUN (or --baseline/--run)"
        )
    result = compare_runs(
        baseline,
        run,
        args.fail_on,
        args.alpha,
        args.min_change,
        history_dirs=args.history,
        allow_unclosed=args.allow_unclosed,
    )
    print(render(result, args.format))
    for failure in result.failures:
        print(f"harness: regression: {failure}", file=sys.stderr)
    if result.verdict in ("inconclusive", "not comparable"):
        why = result.why_not_comparable or result.why_inconclusive
        print(f"harness: {result.verdict} (exit {result.exit_code})" + (f": {why}" if why else ""),
              file=sys.stderr)  # fmt: skip
    return result.exit_code


def _import(args: argparse.Namespace) -> int:
    from harness.analysis.summary import analyze_run
    from harness.app.verb_output import summary_width
    from harness.importers import import_run
    from harness.report.brief import brief
    from harness.report.text import summary_table

    options = {"benchmark": args.benchmark} if args.benchmark is not None else {}
    run = import_run(args.tool, args.source, args.output, **options)
    summary = analyze_run(run)  # --verbose lists what the tool defines differently
    data = {**summary, "run_dir": str(run), "tool": args.tool, "source": str(args.source)}
    table = summary_table(summary) if args.verbose else brief(summary, summary_width())
    print(formatted(args.format, table, data))
    done = f"imported {args.source} ({args.tool}) into {run}"
    print(done, file=sys.stderr if args.format == "json" else sys.stdout)
    return 0


def _report(args: argparse.Namespace) -> int:
    from harness.analysis.loader import expand_run_dirs
    from harness.app.reporting import write_report
    from harness.app.verb_output import print_report, shown_path

    runs = [str(r) for r in expand_run_dirs(args.run_dirs)]
    if not args.trend:
        path = write_report(args.run_dirs, args.output)
        side = f" ({len(runs)} runs side by side)" if len(runs) > 1 else ""
        data: dict[str, object] = {
            "report": shown_path(path),
            "kind": "compare" if len(runs) > 1 else "run",
            "runs": runs,
        }
        print_report(args.format, data, [f"wrote {shown_path(path)}{side}"])
        return 0
    from harness.app.reporting import write_trend
    from harness.report.trend import trend_regressions  # scipy's statistics: --trend only

    path, result = write_trend(args.run_dirs, args.output or "trend.html")
    regressions = list(trend_regressions(result))
    data = {
        "report": shown_path(path),
        "kind": "trend",
        "runs": runs,
        "regressions": regressions,
        "exit_code": result.exit_code,
    }
    print_report(args.format, data, [*regressions, f"wrote {shown_path(path)}"])
    return result.exit_code
