"""`harness whatif RUN_DIR --set KEY=VALUE ...`: predicted against measured, into DIR/whatif.json.

Keys are the scenario's own: `target.engine.options.<engine option>` (num_gpu_blocks,
cpu_offload_blocks, block_size, max_num_batched_tokens, ...), `target.engine.replicas`,
`target.routing` (round_robin, least_outstanding, session_sticky). `--server` says what the run
folder cannot about the measured server (its pool size, its model's KV layout).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from harness.app.commands.options import add_format, add_output, add_sets
from harness.errors import InputError


def register(sub) -> None:
    p = sub.add_parser(
        "whatif",
        help="predict a run's cache hit rate and TTFT at another pool, offload or routing",
        description="Replay a run's own requests (records + trace) through the reference "
        "engine's cache model at the settings given, beside the run itself: the model must "
        "reproduce the measured run first. Modelled, not measured.",
    )
    p.add_argument("run_dir", help="a run folder (records.jsonl, manifest.json, trace.jsonl)")
    add_sets(
        p, "a setting to predict at, e.g. target.engine.options.num_gpu_blocks=300", dest="changes"
    )
    add_sets(
        p,
        "the measured server's own setting the folder lacks, e.g. num_gpu_blocks=1000",
        flag="--server",
        dest="server",
    )
    add_output(p, "folder for whatif.json (RUN_DIR/whatif)")
    add_format(p, "whatif.json's content", choices=("table", "json"))
    p.add_argument(
        "--time-model",
        choices=("auto", "fitted", "calibrated"),
        default="auto",
        help="step times: auto = a simulated run's own cost model, else fitted to its TTFT; "
        "calibrated = the fit with its prefill scaled so the run replays at its own TTFT p50",
    )
    p.add_argument(
        "--like",
        default=None,
        metavar="SERVER",
        help="the measured server's own cache rules as engine options: vllm (vLLM 0.32's; "
        "--server keys override them)",
    )
    p.add_argument(
        "--replays",
        type=int,
        default=None,
        metavar="N",
        help="replays of a run whose steps were noisy (a real server's), each with its steps' "
        "times jittered by the run's own step noise; the prediction is their mean (default 8)",
    )
    p.add_argument(
        "--step-jitter",
        type=float,
        default=None,
        metavar="SIGMA",
        help="each step's time x exp(SIGMA z): the jitter of each replay (default: read from "
        "the run's consecutive decode gaps; 0 = one exact replay)",
    )
    p.set_defaults(func=_whatif)


def _whatif(args: argparse.Namespace) -> int:
    from harness.whatif.predict import REPLAYS, whatif
    from harness.whatif.table import lines

    changes, server = _pairs(args.changes, "--set"), _pairs(args.server, "--server")
    if not changes:
        raise InputError("nothing to predict: give at least one --set KEY=VALUE", field="--set")
    replays = REPLAYS if args.replays is None else args.replays
    doc = whatif(
        args.run_dir, changes, server, args.time_model, replays, args.step_jitter, args.like
    )
    out = Path(args.output) if args.output else Path(args.run_dir) / "whatif"
    out.mkdir(parents=True, exist_ok=True)
    (out / "whatif.json").write_text(json.dumps(doc, indent=2) + "\n")
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(lines(doc)))
        print(f"written: {out / 'whatif.json'}")
    return 0


def _pairs(raw: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in raw:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", field=flag)
        out[key.strip()] = yaml.safe_load(value)
    return out
