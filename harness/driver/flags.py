"""The flags of `harness replay` (target, load, content): overrides onto a scenario.

Every flag names a scenario field (`FIELDS`); a flag not given leaves the scenario's default,
so `harness replay` and `harness run` share one set of defaults (docs/driver.md, "Defaults").
`scenario_doc` turns the parsed flags into a scenario document; the scenario model validates it.
"""

from __future__ import annotations

import argparse
from typing import Any

from harness.errors import InputError

UNSET = argparse.SUPPRESS  # a flag not given is absent from the namespace: the scenario decides

# flag dest -> the scenario field it sets
FIELDS = {
    "model": "target.model",
    "api": "target.api",
    "prompt_format": "target.prompt_format",
    "api_key_env": "target.api_key_env",
    "api_key_file": "target.api_key_file",
    "routing": "target.routing",
    "continuous_usage": "target.continuous_usage",
    "session_id_field": "target.session_id_field",
    "max_connections": "target.max_connections",
    "block_size": "target.block_size",
    "timeout_connect": "target.timeouts.connect_s",
    "timeout_ttft": "target.timeouts.ttft_s",
    "timeout_idle": "target.timeouts.idle_s",
    "timeout_total": "target.timeouts.total_s",
    "concurrency": "load.concurrency",
    "session_rate": "load.session_rate",
    "arrival": "load.arrival",
    "time_scale": "load.time_scale",
    "think_cap": "load.think_cap_s",
    "max_sessions": "load.max_sessions",
    "max_requests": "load.max_requests",
    "max_duration": "load.max_duration_s",
    "drain": "load.drain_s",
    "warmup": "load.warmup_s",
    "warmup_requests": "load.warmup_requests",
    "cooldown": "load.cooldown_s",
    "history": "load.history",
    "mid_trajectory": "load.mid_trajectory",
    "window": "load.window",
    "retries": "load.retry.attempts",
    "seed": "workload.seed",
    "salt": "workload.salt",
    "tokenizer": "workload.tokenizer",
    "trace_format": "workload.trace_format",
    "group_sessions": "workload.group_sessions",
    "mooncake_block_size": "workload.mooncake_block_size",
    "run_id": "run_id",
}
# --no-X flags: they set the field to false
NEGATED = {
    "no_min_tokens": "target.send_min_tokens",
    "no_ignore_eos": "target.send_ignore_eos",
    "no_follow_parent": "target.follow_parent",
    "no_scrape_metrics": "target.scrape_metrics",
    "no_cycle_trace": "load.cycle_trace",
}


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
        default=UNSET,
        help="/v1/chat/completions (messages) or /v1/completions",
    )
    g.add_argument(
        "--prompt-format",
        choices=("tokens", "text"),
        default=UNSET,
        help="completions API: token-id prompts or text prompts",
    )
    key = g.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-env",
        metavar="VAR",
        default=UNSET,
        help="read the API key (sent as a bearer token) from this environment variable",
    )
    key.add_argument(
        "--api-key-file",
        metavar="F",
        default=UNSET,
        help="read the API key from this file (first line)",
    )
    g.add_argument(
        "--header",
        action="append",
        default=UNSET,
        metavar="K:V",
        help="extra HTTP header; repeatable (values are never written to the run folder)",
    )
    g.add_argument(
        "--no-min-tokens",
        action="store_true",
        default=UNSET,
        help="do not send min_tokens (for servers that reject unknown fields)",
    )
    g.add_argument(
        "--no-ignore-eos", action="store_true", default=UNSET, help="do not send ignore_eos"
    )
    g.add_argument(
        "--continuous-usage",
        action="store_true",
        default=UNSET,
        help="ask for vLLM's stream_options.continuous_usage_stats (exact tokens per chunk)",
    )
    g.add_argument(
        "--session-id-field",
        metavar="NAME",
        default=UNSET,
        help="also send the session id in the request body under NAME "
        "(X-Session-ID is always sent)",
    )
    g.add_argument(
        "--routing",
        choices=("round_robin", "least_outstanding", "session_sticky"),
        default=UNSET,
        help="how requests are spread over several endpoints",
    )
    g.add_argument(
        "--no-follow-parent",
        action="store_true",
        default=UNSET,
        help="route and tag subagents by their own id, not their root session's",
    )
    g.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        default=UNSET,
        help="HTTP connection pool size (unset: sized to the load)",
    )
    g.add_argument(
        "--no-scrape-metrics",
        action="store_true",
        default=UNSET,
        help="do not read the endpoints' Prometheus /metrics before and after the run",
    )
    for name, what in (
        ("connect", "to open a connection"),
        ("ttft", "from send to the first output token"),
        ("idle", "between reads once output started"),
        ("total", "for a whole request"),
    ):
        g.add_argument(
            f"--timeout-{name}",
            type=float,
            metavar="S",
            default=UNSET,
            help=f"seconds allowed {what}",
        )


def add_load_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("load")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        default=UNSET,
        help="closed loop: N main sessions in flight, a new one starting when one ends",
    )
    mode.add_argument(
        "--session-rate",
        type=float,
        metavar="R",
        default=UNSET,
        help="open loop: R main sessions per second",
    )
    mode.add_argument(
        "--timestamps",
        action="store_true",
        default=UNSET,
        help="start main sessions at the trace's arrival times",
    )
    g.add_argument(
        "--arrival",
        choices=("poisson", "constant"),
        default=UNSET,
        help="open-loop arrival process",
    )
    g.add_argument(
        "--time-scale",
        type=float,
        metavar="X",
        default=UNSET,
        help="--timestamps: multiply arrival times by X (0.5 = twice as fast)",
    )
    g.add_argument(
        "--think-cap",
        type=float,
        metavar="S",
        default=UNSET,
        help="wait at most S seconds for a think time (human breaks run to hours); the "
        "manifest and the report say how many pauses were shortened",
    )
    g.add_argument("--seed", type=int, default=UNSET, help="seed of the open-loop arrival draws")
    g.add_argument(
        "--max-sessions", type=int, metavar="N", default=UNSET, help="start at most N main sessions"
    )
    g.add_argument(
        "--max-requests", type=int, metavar="N", default=UNSET, help="send at most N requests"
    )
    g.add_argument(
        "--max-duration",
        type=float,
        metavar="S",
        default=UNSET,
        help="stop sending after S seconds; requests in flight may finish within --drain",
    )
    g.add_argument(
        "--drain",
        type=float,
        metavar="S",
        default=UNSET,
        help="after --max-duration, cancel requests still in flight after S seconds",
    )
    warm = g.add_mutually_exclusive_group()
    warm.add_argument(
        "--warmup",
        type=float,
        metavar="S",
        default=UNSET,
        help="mark requests sent in the first S seconds phase=warmup",
    )
    warm.add_argument(
        "--warmup-requests",
        type=int,
        metavar="N",
        default=UNSET,
        help="mark the first N requests sent phase=warmup",
    )
    g.add_argument(
        "--cooldown",
        type=float,
        metavar="S",
        default=UNSET,
        help="mark requests sent in the last S seconds of --max-duration phase=cooldown",
    )
    g.add_argument(
        "--no-cycle-trace",
        action="store_true",
        default=UNSET,
        help="closed loop: run the trace once, even when --max-duration outlasts it",
    )
    g.add_argument(
        "--mid-trajectory",
        action="store_true",
        default=UNSET,
        help="closed loop: start the first N tasks at random turns, their history sent as warm-up",
    )
    g.add_argument(
        "--window",
        choices=("phases", "steady"),
        default=UNSET,
        help="the analyzer's measured window: the phases, or from when load and hit rate hold",
    )
    g.add_argument(
        "--retries",
        type=int,
        metavar="N",
        default=UNSET,
        help="send a turn up to N times when it fails for a reason an agent retries (1: never)",
    )


def add_content_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("content")
    g.add_argument(
        "--from",
        dest="trace_format",
        choices=("auto", "native", "mooncake", "weka"),
        default=UNSET,
        help="trace format (auto: detect)",
    )
    g.add_argument(
        "--group-sessions",
        action="store_true",
        default=UNSET,
        help="Mooncake trace: join requests whose hash ids extend an earlier request into sessions",
    )
    g.add_argument(
        "--mooncake-block-size",
        type=int,
        metavar="N",
        default=UNSET,
        help="Mooncake trace: tokens per hash block (unset: 512)",
    )
    g.add_argument(
        "--history",
        choices=("recorded", "live"),
        default=UNSET,
        help="history from the trace's recorded outputs (exact prefix reuse) or each "
        "reply's actual text",
    )
    g.add_argument(
        "--salt",
        metavar="S",
        default=UNSET,
        help="prefix every prompt with a salt segment so repeated runs do not hit each "
        "other's cache ('auto': a fresh one per run)",
    )
    g.add_argument(
        "--tokenizer",
        metavar="PATH",
        default=UNSET,
        help="a Hugging Face tokenizer folder or its tokenizer.json (needs 'tokenizers'): text "
        "prompts and chat messages get exactly the trace's token counts for it; with the "
        "folder's chat template the analyzer counts chat prompts in the server's tokens",
    )
    g.add_argument(
        "--block-size",
        type=int,
        metavar="N",
        default=UNSET,
        help="server KV block size, kept in the manifest: the analyzer's ideal uses it when it "
        "cannot detect the server's cache granularity (unset: the engine's block_size, else 16)",
    )
    g.add_argument(
        "--run-id",
        default=UNSET,
        help="run id written to records and manifest (unset: RUN_DIR's name)",
    )
    g.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any other scenario field, e.g. target.headers.X-Team=bench "
        "(repeatable; applied after the flags)",
    )


def scenario_doc(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario the flags describe: external endpoints, the trace, and each flag given."""
    given = vars(args)
    doc: dict[str, Any] = {
        "name": "replay",
        "workload": {"trace": str(args.trace)},
        "target": {"kind": "endpoints", "endpoints": [{"url": u} for u in args.endpoint]},
        "load": {},
    }
    for dest, dotted in FIELDS.items():
        if dest in given:
            set_field(doc, dotted, given[dest])
    for dest, dotted in NEGATED.items():
        if given.get(dest):
            set_field(doc, dotted, False)
    if "session_rate" in given:
        doc["load"]["mode"] = "open"
    elif given.get("timestamps"):
        doc["load"]["mode"] = "timestamps"
    if "header" in given:
        doc["target"]["headers"] = headers(given["header"])
    return doc


def set_field(doc: dict, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        doc = doc.setdefault(key, {})
    doc[last] = value


def flag_of(dotted: str) -> str | None:
    """The flag that sets scenario field `dotted`, for error messages."""
    for dest, field in (*FIELDS.items(), *NEGATED.items()):
        if field == dotted:
            return "--" + ("from" if dest == "trace_format" else dest.replace("_", "-"))
    return None


def headers(raw: list[str]) -> dict[str, str]:
    out = {}
    for h in raw:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise InputError(f"expected K:V, got {h.split(':')[0]!r}...", field="--header")
        out[name.strip()] = value.strip()
    return out
