"""`harness probe cache` (harness.probe): flags in, one probe, probe.json + probe.txt + probe.png out.

Exit codes as a run's (harness.exit_codes): 0 measured; 1 the server broke a probe request after
the probe started (what was measured is written); 2 bad input or an unreachable server; 3 cut
short by --max-seconds (partial results written); 130 interrupted (partial results written).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from harness import exit_codes
from harness.app import flags
from harness.app.commands.options import add_format, add_output
from harness.errors import InputError


def register(sub) -> None:
    probe = sub.add_parser("probe", help="measure what a server really does (cache)")
    kinds = probe.add_subparsers(dest="probe_kind", metavar="KIND")
    kinds.required = True
    cache = kinds.add_parser(
        "cache",
        formatter_class=flags.HelpFormatter,
        help="retained prefix-cache capacity, idle retention and block size of an endpoint",
        description="Fill unique contexts past the advertised KV pool and re-send them newest "
        "first: the first miss marks what the server keeps. Also idle retention and block size.",
    )
    cache.add_argument(
        "--endpoint",
        required=True,
        help="OpenAI-compatible base URL, with or without /v1 (http://127.0.0.1:8000)",
    )
    cache.add_argument("--model", required=True, help="served model name")
    add_output(cache, "folder for probe.json, probe.txt, probe.png", required=True)
    add_format(cache, "probe.json's content", choices=("table", "json"))
    cache.add_argument(
        "--pool-tokens", type=int, default=None, help="advertised pool (default: /metrics)"
    )
    cache.add_argument(
        "--context-tokens", type=int, default=None, help="tokens per context (pool/16)"
    )
    cache.add_argument("--fill-factor", type=float, default=1.5, help="fill this many pools (1.5)")
    cache.add_argument("--idle-waits", default="2,8,30", help="idle waits in seconds (2,8,30)")
    cache.add_argument("--detect", choices=("auto", "cached_tokens", "ttft"), default="auto")
    cache.add_argument(
        "--max-fill-tokens", type=int, default=1_000_000, help="fill bound without a pool"
    )
    cache.add_argument(
        "--max-seconds", type=float, default=1800.0, help="stop and write what was measured"
    )
    cache.add_argument("--seed", type=int, default=None, help="prompt seed (default: fresh)")
    flags.add_network_flags(cache)
    cache.set_defaults(func=_probe_cache)


def _probe_cache(args: argparse.Namespace) -> int:
    from harness.probe.cache_probe import ProbeSettings

    settings = ProbeSettings(
        context_tokens=_positive(args.context_tokens, "--context-tokens"),
        pool_tokens=_positive(args.pool_tokens, "--pool-tokens"),
        fill_factor=_factor(args.fill_factor),
        idle_waits_s=_waits(args.idle_waits),
        detect=args.detect,
        max_fill_tokens=_positive(args.max_fill_tokens, "--max-fill-tokens") or 1,
        seed=args.seed,
    )
    network = flags.network_settings(args)
    code, doc = probe_cache(
        args.endpoint, args.model, Path(args.output), settings, args.max_seconds, network
    )
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        from harness.probe.output import table

        print(table(doc))
    return code


def probe_cache(
    endpoint: str,
    model: str,
    out_dir: Path,
    settings,
    max_seconds: float = 1800.0,
    network=None,
) -> tuple[int, dict]:
    """Probe, write the folder, return (exit code, the JSON document)."""
    from harness.probe.cache_probe import CacheProbe, ProbeResult
    from harness.probe.client import ProbeClient, ProbeError
    from harness.probe.output import document, write

    seed = settings.seed if settings.seed is not None else int.from_bytes(os.urandom(4), "little")
    result = ProbeResult(endpoint, model, seed)

    async def main() -> None:
        async with ProbeClient(endpoint, model, network=network) as client:
            await asyncio.wait_for(CacheProbe(client, settings, result).run(), max_seconds)

    start = time.perf_counter()
    code, ending = exit_codes.OK, "complete"
    try:
        asyncio.run(main())
    except TimeoutError:
        code, ending = exit_codes.CUT_SHORT, f"cut short by --max-seconds {max_seconds:g}"
    except KeyboardInterrupt:
        code, ending = exit_codes.INTERRUPTED, "interrupted"
    except ProbeError as exc:
        code = exit_codes.FAILED_GATE if result.stages_done else exit_codes.BAD_INPUT
        ending = f"failed: {exc}"
        print(f"harness: error: {exc}", file=sys.stderr)
    doc = document(result, time.perf_counter() - start, ending)
    write(doc, out_dir)
    return code, doc


def _positive(value: int | None, flag: str) -> int | None:
    if value is not None and value < 1:
        raise InputError(f"must be >= 1, got {value}", field=flag)
    return value


def _factor(value: float) -> float:
    if not value > 1.0:
        raise InputError(f"must be > 1 (fill past the pool), got {value}", field="--fill-factor")
    return value


def _waits(text: str) -> tuple[float, ...]:
    try:
        waits = tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise InputError(
            f"expected seconds like 2,8,30, got {text!r}", field="--idle-waits"
        ) from None
    if not waits or any(not w >= 0 for w in waits):
        raise InputError(f"expected seconds >= 0 like 2,8,30, got {text!r}", field="--idle-waits")
    return waits
