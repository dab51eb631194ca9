"""The flags of `harness replay` (target, load, content) and what they build: a ReplayConfig
and an OpenAI HTTP target. `harness run` can reuse them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.errors import InputError


def add_target_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument(
        "--endpoint",
        action="append",
        required=True,
        metavar="URL",
        help="base URL (http://host:port or .../v1); repeat for several endpoints",
    )
    g.add_argument("--model", required=True, help="model name sent in each request")
    g.add_argument(
        "--api",
        choices=("chat", "completions"),
        default="chat",
        help="/v1/chat/completions (messages) or /v1/completions (default: chat)",
    )
    g.add_argument(
        "--prompt-format",
        choices=("tokens", "text"),
        default="tokens",
        help="completions API: token-id prompts or text prompts (default: tokens)",
    )
    key = g.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="read the API key (sent as a bearer token) from this environment variable",
    )
    key.add_argument(
        "--api-key-file", metavar="F", help="read the API key from this file (first line)"
    )
    g.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K:V",
        help="extra HTTP header; repeatable (values are never written to the run folder)",
    )
    g.add_argument(
        "--no-min-tokens",
        action="store_true",
        help="do not send min_tokens (for servers that reject unknown fields)",
    )
    g.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos")
    g.add_argument(
        "--continuous-usage",
        action="store_true",
        help="ask for vLLM's stream_options.continuous_usage_stats (exact tokens per chunk)",
    )
    g.add_argument(
        "--session-id-field",
        metavar="NAME",
        help="also send the session id in the request body under NAME (X-Session-ID is always sent)",
    )
    g.add_argument(
        "--routing",
        choices=("round_robin", "least_outstanding", "session_sticky"),
        default="round_robin",
        help="how requests are spread over several endpoints (default: round_robin)",
    )
    g.add_argument(
        "--no-follow-parent",
        action="store_true",
        help="route and tag subagents by their own id, not their root session's",
    )
    g.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="HTTP connection pool size (default: sized to the load)",
    )
    for name, default, what in (
        ("connect", 30.0, "to open a connection"),
        ("ttft", 600.0, "from send to the first output token"),
        ("idle", 120.0, "between reads once output started"),
        ("total", 3600.0, "for a whole request"),
    ):
        g.add_argument(
            f"--timeout-{name}",
            type=float,
            default=default,
            metavar="S",
            help=f"seconds allowed {what} (default: {default:g})",
        )


def add_load_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("load")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="closed loop: N main sessions in flight, a new one starting when one ends (default: 1)",
    )
    mode.add_argument(
        "--session-rate", type=float, metavar="R", help="open loop: R main sessions per second"
    )
    mode.add_argument(
        "--timestamps", action="store_true", help="start main sessions at the trace's arrival times"
    )
    g.add_argument(
        "--arrival",
        choices=("poisson", "constant"),
        default="poisson",
        help="open-loop arrival process (default: poisson)",
    )
    g.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="--timestamps: multiply arrival times by X (0.5 = twice as fast; default: 1)",
    )
    g.add_argument(
        "--seed", type=int, default=0, help="seed of the open-loop arrival draws (default: 0)"
    )
    g.add_argument("--max-sessions", type=int, metavar="N", help="start at most N main sessions")
    g.add_argument("--max-requests", type=int, metavar="N", help="send at most N requests")
    g.add_argument(
        "--max-duration",
        type=float,
        metavar="S",
        help="stop sending after S seconds; requests in flight may finish within --drain",
    )
    g.add_argument(
        "--drain",
        type=float,
        default=60.0,
        metavar="S",
        help="after --max-duration, cancel requests still in flight after S seconds (default: 60)",
    )
    warm = g.add_mutually_exclusive_group()
    warm.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        metavar="S",
        help="mark requests sent in the first S seconds phase=warmup",
    )
    warm.add_argument(
        "--warmup-requests",
        type=int,
        default=0,
        metavar="N",
        help="mark the first N requests sent phase=warmup",
    )
    g.add_argument(
        "--cooldown",
        type=float,
        default=0.0,
        metavar="S",
        help="mark requests sent in the last S seconds of --max-duration phase=cooldown",
    )


def add_content_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("content")
    g.add_argument(
        "--from",
        dest="trace_format",
        default="auto",
        choices=("auto", "native", "mooncake", "weka"),
        help="trace format (default: detect)",
    )
    g.add_argument(
        "--group-sessions",
        action="store_true",
        help="Mooncake trace: join requests whose hash ids extend an earlier request into sessions",
    )
    g.add_argument(
        "--mooncake-block-size",
        type=int,
        metavar="N",
        help="Mooncake trace: tokens per hash block (default: 512)",
    )
    g.add_argument(
        "--history",
        choices=("recorded", "live"),
        default="recorded",
        help="history from the trace's recorded outputs (exact prefix reuse) or each reply's actual text (default: recorded)",
    )
    g.add_argument(
        "--salt",
        metavar="S",
        help="prefix every prompt with a salt segment so repeated runs do not hit each other's cache",
    )
    g.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="a Hugging Face tokenizer folder or its tokenizer.json (needs 'tokenizers'): text prompts "
        "and chat messages get exactly the trace's token counts for it; with the folder's chat "
        "template the analyzer counts chat prompts in the server's tokens (docs/metrics.md)",
    )
    g.add_argument(
        "--block-size",
        type=int,
        default=16,
        metavar="N",
        help="server KV block size used for cached_tokens_ideal (default: 16)",
    )
    g.add_argument(
        "--run-id", help="run id written to records and manifest (default: RUN_DIR's name)"
    )


def api_key(args: argparse.Namespace) -> str | None:
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise InputError(
                f"environment variable {args.api_key_env} is not set or empty",
                field="--api-key-env",
            )
        return key
    if args.api_key_file:
        try:
            lines = Path(args.api_key_file).read_text().splitlines()
        except OSError as exc:
            raise InputError(
                f"cannot read API key file: {exc.strerror}", path=args.api_key_file
            ) from None
        if not lines or not lines[0].strip():
            raise InputError("API key file is empty", path=args.api_key_file)
        return lines[0].strip()
    return None


def headers(raw: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for h in raw:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise InputError(f"expected K:V, got {h.split(':')[0]!r}...", field="--header")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def build_config(args: argparse.Namespace):
    from harness.driver.config import ReplayConfig

    load = (
        "open" if args.session_rate is not None else "timestamps" if args.timestamps else "closed"
    )
    return ReplayConfig(
        load=load,
        concurrency=args.concurrency or 1,
        session_rate=args.session_rate,
        arrival=args.arrival,
        time_scale=args.time_scale,
        max_sessions=args.max_sessions,
        max_requests=args.max_requests,
        max_duration=args.max_duration,
        drain_s=args.drain,
        warmup_s=args.warmup,
        warmup_requests=args.warmup_requests,
        cooldown_s=args.cooldown,
        history=args.history,
        api=args.api,
        prompt_format=args.prompt_format,
        routing=args.routing,
        follow_parent=not args.no_follow_parent,
        block_size=args.block_size,
        salt=args.salt,
        tokenizer=args.tokenizer,
        seed=args.seed,
        run_id=args.run_id or Path(args.output).resolve().name,
    )


def build_target(args: argparse.Namespace, trace, config):
    from harness.driver.openai_http import HTTPTargetConfig, OpenAIHTTPTarget
    from harness.driver.run import connection_limit
    from harness.driver.target import Timeouts

    try:
        timeouts = Timeouts(
            args.timeout_connect, args.timeout_ttft, args.timeout_idle, args.timeout_total
        )
    except ValueError as exc:
        raise InputError(str(exc), field="--timeout-*") from None
    return OpenAIHTTPTarget(
        HTTPTargetConfig(
            endpoints=tuple(args.endpoint),
            model=args.model,
            api=args.api,
            api_key=api_key(args),
            headers=headers(args.header),
            min_tokens=not args.no_min_tokens,
            ignore_eos=not args.no_ignore_eos,
            continuous_usage=args.continuous_usage,
            session_id_field=args.session_id_field,
            timeouts=timeouts,
            max_connections=args.max_connections or connection_limit(trace, config),
        )
    )


def load_trace_arg(args: argparse.Namespace):
    from harness.trace.formats import load_trace

    return load_trace(
        args.trace,
        args.trace_format,
        block_size=args.mooncake_block_size,
        group_sessions=args.group_sessions,
    )
