"""The flags of `harness replay`: each one sets one scenario field, from one table (`FLAGS`).

A flag not given leaves the scenario's default, so `harness replay` and `harness run` share one
set of defaults (docs/driver.md, "Defaults"). A flag's value is checked by the scenario model,
like the file's, and its help text is the field's description (`HelpFormatter`); both are read
from the model only when needed, so `harness --help` does not import it.
"""

from __future__ import annotations

import argparse
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from harness.app.commands.options import add_sets
from harness.errors import HarnessError, InputError

UNSET = argparse.SUPPRESS  # a flag not given is absent from the namespace: the scenario decides


@dataclass(frozen=True)
class Flag:
    group: str  # the --help section: target, load or content
    option: str
    field: str  # the scenario field it sets, by its files' key; also the argparse dest
    metavar: str | None = None
    const: Any = None  # a switch: sets the field to this (False for a --no-X flag)
    exclusive: str | None = None  # flags with the same name exclude each other
    help: str | None = None  # only a switch that sets a value says what it does; else the field's


FLAGS = (
    Flag("target", "--model", "target.model"),
    Flag("target", "--api", "target.api"),
    Flag("target", "--prompt-format", "target.prompt_format"),
    Flag("target", "--api-key-env", "target.api_key_env", "VAR", exclusive="key"),
    Flag("target", "--api-key-file", "target.api_key_file", "F", exclusive="key"),
    Flag(
        "target",
        "--no-min-tokens",
        "target.send_min_tokens",
        const=False,
        help="do not send min_tokens: outputs may end before the trace's length (for servers that"
        " reject unknown fields)",
    ),
    Flag(
        "target",
        "--no-ignore-eos",
        "target.send_ignore_eos",
        const=False,
        help="do not send ignore_eos: the model's end-of-sequence token may end an output early",
    ),
    Flag("target", "--continuous-usage", "target.continuous_usage", const=True),
    Flag("target", "--cache-details", "target.cache_details", const=True),
    Flag("target", "--tool-choice", "target.tool_choice", "CHOICE"),
    Flag("target", "--session-id-field", "target.session_id_field", "NAME"),
    Flag("target", "--session-headers", "target.session_headers", "F,F"),
    Flag("target", "--cache-control", "target.cache_control", const=True),
    Flag("target", "--cache-rules", "target.cache_rules", "KIND"),
    Flag("target", "--previous-response-id", "target.previous_response_id", const=True),
    Flag("target", "--routing", "target.routing"),
    Flag(
        "target",
        "--no-follow-parent",
        "target.follow_parent",
        const=False,
        help="route and tag each subagent by its own session id, not its root session's: a"
        " sticky router may send it where its parent's prefix is not cached",
    ),
    Flag("target", "--max-connections", "target.max_connections", "N"),
    Flag(
        "target",
        "--no-scrape-metrics",
        "target.scrape_metrics",
        const=False,
        help="do not read the endpoints' /metrics before and after: no server-side hit rate,"
        " no speculative-decoding counts",
    ),
    Flag(
        "target",
        "--no-preflight",
        "target.preflight",
        const=False,
        help="start the clock without checking /v1/models and one probe request: a wrong model"
        " or URL shows up as failed requests instead of one error",
    ),
    Flag("target", "--context-overflow", "target.context_overflow"),
    Flag("target", "--timeout-connect", "target.timeouts.connect_s", "S"),
    Flag("target", "--timeout-ttft", "target.timeouts.ttft_s", "S"),
    Flag("target", "--timeout-idle", "target.timeouts.idle_s", "S"),
    Flag("target", "--timeout-total", "target.timeouts.total_s", "S"),
    Flag("network", "--proxy", "target.network.proxy", "URL", exclusive="proxy"),
    Flag(
        "network",
        "--no-proxy",
        "target.network.proxy",
        const="none",
        exclusive="proxy",
        help="send directly, whatever HTTP_PROXY, HTTPS_PROXY or ALL_PROXY say",
    ),
    Flag("network", "--ca-bundle", "target.network.ca_bundle", "FILE"),
    Flag("network", "--client-cert", "target.network.client_cert", "FILE"),
    Flag("network", "--client-key", "target.network.client_key", "FILE"),
    Flag("network", "--insecure", "target.network.insecure", const=True),
    Flag("network", "--max-redirects", "target.network.max_redirects", "N"),
    Flag("network", "--redirect-other-hosts", "target.network.redirect_other_hosts", const=True),
    Flag("load", "--concurrency", "load.concurrency", "N", exclusive="mode"),
    Flag("load", "--session-rate", "load.session_rate", "R", exclusive="mode"),
    Flag(
        "load",
        "--timestamps",
        "load.mode",
        const="timestamps",
        exclusive="mode",
        help="start main sessions at the trace's arrival times",
    ),
    Flag("load", "--arrival", "load.arrival"),
    Flag("load", "--time-scale", "load.time_scale", "X"),
    Flag("load", "--think-cap", "load.think_cap_s", "S"),
    Flag("load", "--seed", "workload.seed"),
    Flag("load", "--max-sessions", "load.max_sessions", "N"),
    Flag("load", "--max-requests", "load.max_requests", "N"),
    Flag("load", "--max-duration", "load.max_duration_s", "S"),
    Flag("load", "--drain", "load.drain_s", "S"),
    Flag("load", "--warmup", "load.warmup_s", "S", exclusive="warmup"),
    Flag("load", "--warmup-requests", "load.warmup_requests", "N", exclusive="warmup"),
    Flag("load", "--cooldown", "load.cooldown_s", "S"),
    Flag(
        "load",
        "--no-cycle-trace",
        "load.cycle_trace",
        const=False,
        help="do not draw the trace again when it runs out: a closed loop's load falls as its"
        " last tasks end",
    ),
    Flag("load", "--mid-trajectory", "load.mid_trajectory", const=True),
    Flag("load", "--window", "load.window"),
    Flag("load", "--retries", "load.retry.attempts", "N"),
    Flag("content", "--from", "workload.trace_format"),
    Flag("content", "--group-sessions", "workload.group_sessions", const=True),
    Flag("content", "--mooncake-block-size", "workload.mooncake_block_size", "N"),
    Flag("content", "--history", "load.history"),
    Flag("content", "--salt", "workload.salt", "S"),
    Flag("content", "--tokenizer", "workload.tokenizer", "PATH"),
    Flag("content", "--block-size", "target.block_size", "N"),
    Flag("content", "--run-id", "run_id"),
)
BY_FIELD = {f.field: f for f in FLAGS}
BY_OPTION = {f.option: f for f in FLAGS}  # two flags may set one field (--proxy, --no-proxy)
NETWORK = "target.network."


def add_flags(p: argparse.ArgumentParser) -> None:
    """Every flag of the table, then the ones that are not one field: endpoints, headers, --set."""
    groups = {name: p.add_argument_group(name) for name in ("target", "network", "load", "content")}
    groups["target"].add_argument(
        "--endpoint",
        action="append",
        required=True,
        metavar="URL",
        help="base URL (http://host:port or .../v1); repeat for several endpoints",
    )
    _add_rows(groups, FLAGS)
    groups["target"].add_argument(
        "--header",
        action="append",
        default=UNSET,
        metavar="K:V",
        help="extra HTTP header; repeatable (values are never written to the run folder)",
    )
    add_sets(
        groups["content"],
        "set any other scenario field, e.g. target.headers.X-Team=bench "
        "(repeatable; applied after the flags)",
    )


def add_network_flags(p: argparse.ArgumentParser) -> None:
    """The network's flags alone (proxy, trust, client certificate, redirects), for a verb
    that talks to an endpoint outside a scenario (`harness probe`); `network_settings` reads
    them."""
    _add_rows({"network": p.add_argument_group("network")}, NETWORK_FLAGS)


def network_settings(args: argparse.Namespace):
    """The network flags given, over the defaults: a `NetworkSettings` (one line if invalid)."""
    from pydantic import ValidationError

    from harness.driver.http import NetworkSettings

    given = {
        f.field.removeprefix(NETWORK): v
        for f in NETWORK_FLAGS
        if (v := getattr(args, f.field, UNSET)) is not UNSET
    }
    try:
        return NetworkSettings.model_validate(given)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = NETWORK + ".".join(str(p) for p in first["loc"])
        raise InputError(
            first["msg"], field=BY_FIELD[name].option if name in BY_FIELD else name
        ) from None


def _add_rows(groups: dict[str, Any], rows: tuple[Flag, ...]) -> None:
    exclusive: dict[str, Any] = {}
    for flag in rows:
        group = groups[flag.group]
        if flag.exclusive:
            if flag.exclusive not in exclusive:
                exclusive[flag.exclusive] = group.add_mutually_exclusive_group()
            group = exclusive[flag.exclusive]
        _add(group, flag)


def _add(group: Any, flag: Flag) -> None:
    # The help text is a placeholder that HelpFormatter replaces with the field's description.
    kw: dict[str, Any] = {"dest": flag.field, "default": UNSET, "help": flag.help or flag.field}
    if flag.const is not None:
        kw |= {"action": "store_const", "const": flag.const}
    else:
        kw["metavar"] = flag.metavar
    group.add_argument(flag.option, **kw)


def require_model(args: argparse.Namespace) -> None:
    """`--model` is needed: one line naming it, and the models the first endpoint serves."""
    if getattr(args, "target.model", None):
        return
    endpoints = getattr(args, "endpoint", None) or []
    served = served_models(endpoints[0], network_settings(args)) if endpoints else []
    hint = f"; {endpoints[0]} serves: {', '.join(served)}" if served else ""
    raise InputError(f"--model is required (the model name the server expects){hint}")


def served_models(endpoint: str, network: Any = None, timeout_s: float = 3.0) -> list[str]:
    """The model ids an endpoint's /v1/models lists (through the harness's one HTTP client, on
    `network`'s settings); none when it cannot be asked."""
    import asyncio
    import json

    from harness.driver.http import HTTPClient, Network, NetworkSettings, WireError, endpoint_url

    async def ask() -> tuple[int, bytes]:
        net = Network(network or NetworkSettings())
        async with HTTPClient(net, timeout=timeout_s) as http:
            return await http.get(endpoint_url(endpoint, "completions", "/models"))

    try:
        status, body = asyncio.run(ask())
        data = json.loads(body).get("data") or [] if status == 200 else []
    except (WireError, HarnessError, OSError, ValueError, AttributeError):
        return []
    return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]


class HelpFormatter(argparse.HelpFormatter):
    """Each flag's help is its field's description and default, read from the scenario model
    when help is printed; a flag with fixed choices shows them."""

    def _get_help_string(self, action: argparse.Action) -> str:
        flag = _flag_of(action)
        if flag is None:
            return action.help or ""
        from harness.app.scenario import default_text, field_info

        text = flag.help or field_info(flag.field).description or ""
        if flag.const is not None:
            value = str(flag.const).lower() if isinstance(flag.const, bool) else flag.const
            text += f" (sets {flag.field} {value}; default: {default_text(flag.field)})"
        elif not action.required:
            text += f" (default: {default_text(flag.field)})"
        return text.replace("%", "%%")

    def _metavar_formatter(self, action: argparse.Action, default_metavar: str):
        flag = _flag_of(action)
        if flag is not None and action.metavar is None and action.nargs != 0:
            from harness.app.scenario import field_info

            choices = literal_choices(field_info(flag.field).annotation)
            shown = "{" + ",".join(choices) + "}" if choices else flag.field.rsplit(".")[-1].upper()
            return lambda size: (shown,) * size
        return super()._metavar_formatter(action, default_metavar)


def _flag_of(action: argparse.Action) -> Flag | None:
    options = action.option_strings
    return BY_OPTION.get(options[0]) if options else None


def literal_choices(annotation: Any) -> tuple[str, ...]:
    """A Literal field's values (also inside `X | None`); () for any other type."""
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    return tuple(get_args(annotation)) if get_origin(annotation) is Literal else ()


def scenario_doc(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario the flags describe: external endpoints, the trace, and each flag given."""
    given = vars(args)
    doc: dict[str, Any] = {
        "name": "replay",
        "workload": {"trace": str(args.trace)},
        "target": {"kind": "endpoints", "endpoints": [{"url": u} for u in args.endpoint]},
        "load": {},
    }
    for field in BY_FIELD:
        if field in given:
            set_field(doc, field, given[field])
    if "load.session_rate" in given:
        doc["load"]["mode"] = "open"
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
    flag = BY_FIELD.get(dotted)
    return flag.option if flag else None


def headers(raw: list[str]) -> dict[str, str]:
    out = {}
    for h in raw:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise InputError(f"expected K:V, got {h.split(':')[0]!r}...", field="--header")
        out[name.strip()] = value.strip()
    return out


NETWORK_FLAGS = tuple(f for f in FLAGS if f.field.startswith(NETWORK))
