"""`harness trace generate | convert | stats | fit`: flags in, one plain function each."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness.app.commands.options import add_format, add_output, add_sets
from harness.errors import InputError
from harness.trace.formats import FORMATS


def register(sub: argparse._SubParsersAction) -> None:
    trace = sub.add_parser("trace", help="generate, convert and inspect traces")
    verbs = trace.add_subparsers(dest="trace_verb", metavar="ACTION")
    verbs.required = True
    _register_generate(verbs)
    _register_convert(verbs)
    _register_stats(verbs)
    _register_fit(verbs)


def _register_generate(verbs) -> None:
    p = verbs.add_parser("generate", help="draw a trace from a workload profile")
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="workload profile YAML (default: workloads/agentx.yaml)",
    )
    p.add_argument(
        "--sessions", type=int, default=None, help="main sessions to draw (default: the profile's)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=1,
        help="random seed; the same seed and profile give the same bytes (default: 1)",
    )
    p.add_argument(
        "--scale",
        type=float,
        default=None,
        help="multiply every token count by this (e.g. 0.01 for a CPU)",
    )
    add_sets(p, "override a profile field by dotted key, value read as YAML (repeatable)")
    add_output(p, "native trace file to write (JSONL)", type=Path, required=True)
    p.set_defaults(func=cmd_generate)


def _register_convert(verbs) -> None:
    p = verbs.add_parser("convert", help="convert between trace formats")
    p.add_argument(
        "input", type=Path, help="trace file (or a directory of Weka/AgentX files) to read"
    )
    add_output(p, "file to write (Weka: a directory, or a .jsonl file)", type=Path, required=True)
    _add_from(p)
    p.add_argument(
        "--to",
        dest="dst",
        default="native",
        choices=FORMATS,
        help="output format (default: native)",
    )
    p.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="tokens per hash block: of a Mooncake input, and of a Mooncake output (default: 512)",
    )
    p.add_argument(
        "--group-sessions",
        action="store_true",
        help="Mooncake input: join requests whose hash ids extend an earlier request into sessions",
    )
    p.add_argument(
        "--salt", default=None, help="Mooncake output: prefix every prompt with this salt's content"
    )
    p.add_argument(
        "--hash-id-scope",
        dest="scope",
        default="local",
        choices=["local", "global"],
        help="Weka output: block ids private to each trace (local, what AIPerf reads) or shared across traces (default: local)",
    )
    p.add_argument(
        "--model",
        default="agentic-harness",
        help="Weka output: the model name each request records (default: agentic-harness)",
    )
    p.set_defaults(func=cmd_convert)


def _add_from(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from",
        dest="src",
        default="auto",
        choices=("auto", *FORMATS),
        help="input format (default: detect)",
    )


def _register_stats(verbs) -> None:
    p = verbs.add_parser(
        "stats", help="fidelity table, distributions and prefix-cache hit of a trace"
    )
    p.add_argument(
        "trace",
        type=Path,
        help="trace file (native, Mooncake or Weka/AgentX) or a directory of Weka/AgentX files",
    )
    _add_from(p)
    add_format(p, "one JSON object")
    p.add_argument(
        "--block-size",
        type=int,
        default=16,
        help="cache block size for the hit rates (default: 16)",
    )
    p.add_argument(
        "--cache-tokens",
        type=int,
        default=None,
        help="also simulate an LRU prefix cache of this many tokens",
    )
    p.add_argument(
        "--group-sessions",
        action="store_true",
        help="Mooncake input: group requests into sessions by prefix chains",
    )
    p.add_argument(
        "--mooncake-block-size",
        type=int,
        default=None,
        help="Mooncake input: tokens per hash block (default: 512)",
    )
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="workload profile whose think-time model is shown beside the trace's (default: workloads/agentx.yaml)",
    )
    p.set_defaults(func=cmd_stats)


def _register_fit(verbs) -> None:
    p = verbs.add_parser(
        "fit", help="fit a workload profile to a trace (a recording): more of the same traffic"
    )
    p.add_argument("trace", type=Path, help="trace to fit (a recording's trace.jsonl, any format)")
    add_output(p, "profile YAML to write", type=Path, required=True)
    p.add_argument("--name", default=None, help="the profile's name (default: fit-<file>)")
    p.add_argument(
        "--check-sessions",
        type=int,
        default=None,
        metavar="N",
        help="main sessions drawn to check the fit (default: 4x the trace's, >= 100)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the check's draw (default: 1)")
    p.set_defaults(func=cmd_fit)


def _positive(value: int | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise InputError(f"{flag} must be positive, got {value}")


def cmd_generate(args: argparse.Namespace) -> int:
    from harness.trace.generate import generate
    from harness.trace.native import write_trace
    from harness.trace.profile import load_profile

    _positive(args.sessions, "--sessions")
    if args.scale is not None and args.scale <= 0:
        raise InputError(f"--scale must be positive, got {args.scale}")
    profile = load_profile(args.profile, sets=args.sets)
    t0 = time.perf_counter()
    trace = generate(profile, seed=args.seed, sessions=args.sessions, scale=args.scale)
    write_trace(trace, args.output)
    mains = len(trace.main_sessions)
    print(
        f"wrote {args.output}: {mains} main + {len(trace.sessions) - mains} subagent sessions, "
        f"{trace.num_requests} requests ({time.perf_counter() - t0:.1f} s)",
        file=sys.stderr,
    )
    return 0


class _Progress:
    """`converting: 12,000/49,334 requests (24%)` on stderr, at most every `every_s` seconds."""

    def __init__(self, total: int, unit: str, every_s: float = 5.0) -> None:
        self.total, self.unit, self.every_s = total, unit, every_s
        self.t0 = self.last = time.perf_counter()

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if now - self.last >= self.every_s:
            self.last = now
            print(
                f"converting: {done:,}/{self.total:,} {self.unit} ({done / self.total:.0%}, {now - self.t0:.0f} s)",
                file=sys.stderr,
            )


def cmd_convert(args: argparse.Namespace) -> int:
    from harness.trace.formats import detect_format, load_trace, save_trace

    _positive(args.block_size, "--block-size")
    t0 = time.perf_counter()
    in_block = args.block_size if args.src in ("auto", "mooncake") else None
    trace = load_trace(
        args.input, args.src, block_size=in_block, group_sessions=args.group_sessions
    )
    if time.perf_counter() - t0 >= 2.0:  # a corpus: say the read is done before the long write
        print(f"read {args.input}: {trace.num_requests:,} requests", file=sys.stderr)
    total, unit = (
        (len(trace.main_sessions), "traces")
        if args.dst == "weka"
        else (trace.num_requests, "requests")
    )
    save_trace(
        trace,
        args.output,
        args.dst,
        block_size=args.block_size,
        salt=args.salt,
        scope=args.scope,
        model=args.model,
        progress=_Progress(total, unit),
    )
    src = detect_format(args.input) if args.src == "auto" else args.src
    mains = len(trace.main_sessions)
    print(
        f"converted {args.input} ({src}) -> {args.output} ({args.dst}): {mains} main + "
        f"{len(trace.sessions) - mains} subagent sessions, {trace.num_requests:,} requests "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from harness.trace.formats import load_trace
    from harness.trace.profile import load_profile
    from harness.trace.stats import compute_stats
    from harness.trace.stats_report import render

    _positive(args.block_size, "--block-size")
    _positive(args.mooncake_block_size, "--mooncake-block-size")
    if args.cache_tokens is not None and args.cache_tokens < 0:
        raise InputError(f"--cache-tokens must be >= 0, got {args.cache_tokens}")
    trace = load_trace(
        args.trace,
        args.src,
        block_size=args.mooncake_block_size,
        group_sessions=args.group_sessions,
    )
    profile = load_profile(args.profile)
    stats = compute_stats(
        trace, block_size=args.block_size, cache_tokens=args.cache_tokens, profile=profile
    )
    if args.format == "json":
        print(json.dumps(stats, indent=None, separators=(",", ":")))
        return 0
    fenced = args.format == "markdown"
    print("```text" if fenced else "", end="\n" if fenced else "")
    render(stats, str(args.trace), sys.stdout)
    print("```" if fenced else "", end="\n" if fenced else "")
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from harness.trace.fit import check, fit_profile, profile_yaml
    from harness.trace.formats import load_trace
    from harness.trace.stats import compute_stats
    from harness.trace.stats_report import render_fit

    _positive(args.check_sessions, "--check-sessions")
    trace = load_trace(args.trace)
    stem = args.trace.parent.name if args.trace.name == "trace.jsonl" else args.trace.stem
    try:
        profile = fit_profile(trace, name=args.name or f"fit-{stem}", source=str(args.trace))
    except ValueError as exc:
        raise InputError(f"{args.trace}: {exc}") from None
    args.output.write_text(profile_yaml(profile, str(args.trace)), encoding="utf-8")
    fitted = compute_stats(trace)
    n = args.check_sessions or max(100, 4 * len(trace.main_sessions))
    drawn, rows = check(profile, fitted, sessions=n, seed=args.seed)
    print(f"wrote {args.output}: profile {profile.name!r} fitted to {args.trace}")
    render_fit(fitted, drawn, rows, f"drawn ({n} sessions, seed {args.seed})", sys.stdout)
    return 0
