"""`harness serve` and `harness engine calibrate`; engine flags named as vLLM names them.

`add_engine_arguments` / `engine_config_from_args` are shared with `harness run`, so a scenario run
in-process takes the same flags as the server. Flags default to None: only what the user sets
reaches `EngineConfig`, whose own defaults stay the single source of truth.
"""

from __future__ import annotations

import argparse
import sys

from harness.app.commands.options import add_output
from harness.engine.config import (
    DEVICES,
    DTYPES,
    PRESETS,
    RETENTION_POLICIES,
    RUNNERS,
    EngineConfig,
)
from harness.errors import EngineError

# (flag, EngineConfig field, type, help)
_VALUE_FLAGS = (
    ("--block-size", "block_size", int, "tokens per KV block (16)"),
    (
        "--num-gpu-blocks-override",
        "num_gpu_blocks",
        int,
        "KV blocks on the device, overriding the memory budget (also --num-gpu-blocks)",
    ),
    (
        "--kv-cache-memory-gb",
        "kv_cache_memory_gb",
        float,
        "KV cache budget in GiB when the block count is not given (1 GiB on CPU)",
    ),
    (
        "--max-num-batched-tokens",
        "max_num_batched_tokens",
        int,
        "token budget per engine step (2048)",
    ),
    ("--max-num-seqs", "max_num_seqs", int, "most requests running at once (64)"),
    ("--max-model-len", "max_model_len", int, "context limit in tokens (the preset's)"),
    (
        "--long-prefill-token-threshold",
        "long_prefill_token_threshold",
        int,
        "most prompt tokens one request may prefill per step; 0 = no cap (0)",
    ),
    (
        "--prefill-schedule-interval",
        "prefill_schedule_interval",
        int,
        "admit prefill work only every N steps (1)",
    ),
    ("--cpu-offload-blocks", "cpu_offload_blocks", int, "CPU-tier capacity in blocks; 0 = off (0)"),
    (
        "--disk-offload-blocks",
        "disk_offload_blocks",
        int,
        "disk-tier capacity in blocks (evicted from the CPU tier); 0 = off (0)",
    ),
    ("--disk-offload-dir", "disk_offload_dir", str, "an existing folder for the disk tier's files"),
    (
        "--kv-store",
        "kv_store",
        str,
        "URL of a `harness kv-store` shared by replicas (every full block goes there)",
    ),
    ("--seed", "seed", int, "weights and sampling seed (0)"),
    ("--cost-model", "cost_model", str, "calibrated cost model file for --runner simulated"),
    (
        "--served-model-name",
        "served_model_name",
        str,
        "the model name clients send and /v1/models lists (agentic-harness-reference)",
    ),
    (
        "--sim-time-scale",
        "sim_time_scale",
        float,
        "simulated runner: wall seconds slept per modelled second; 0 = no sleeping (1.0)",
    ),
    (
        "--step-time-scale",
        "step_time_scale",
        float,
        "every runner: each step takes X times as long, an injected slowdown (1.0)",
    ),
    (
        "--sim-model",
        "sim_model",
        str,
        "simulated runner on a roofline --device (h100, h200, a100, l40s): the model whose shape it"
        " runs (llama-3.1-8b, llama-3.1-70b, deepseek-v3, gemma-3-270m; modelled, not measured)",
    ),
    (
        "--tensor-parallel-size",
        "tensor_parallel_size",
        int,
        "roofline device: GPUs one replica spans (1)",
    ),
)
_CHOICE_FLAGS = (
    ("--runner", "runner", RUNNERS, "torch = real compute; simulated = cost-model timing (torch)"),
    (
        "--clock",
        "clock",
        ("wall",),
        "a served engine keeps the wall clock; the virtual clock is `harness simulate`'s, in one"
        " process with the driver (wall)",
    ),
    (
        "--preset",
        "preset",
        tuple(PRESETS),
        "model: seeded Llama sizes, or gemma3-270m (also --model) (tiny)",
    ),
    ("--device", "device", None, f"{' | '.join(DEVICES)} | cuda:N (auto)"),
    ("--dtype", "dtype", tuple(DTYPES), "KV cache and weights dtype (float32)"),
    (
        "--prefix-cache-retention",
        "prefix_cache_retention",
        RETENTION_POLICIES,
        "sliding-window states kept past their request: none, interval (turn ends), "
        "interval+selective (also prefixes seen twice), replay+junction (vLLM 0.32's: prompt - 1 "
        "and junctions), all (every given-back page kept, as earlier vLLM) (interval+selective)",
    ),
    (
        "--free-order",
        "free_order",
        ("block", "group"),
        "a finished request's pages into the LRU: block by block, or group by group sliding"
        " window first, as vLLM does (block)",
    ),
)
_BOOL_FLAGS = (
    ("enable_prefix_caching", "reuse KV blocks across requests with a shared prefix (on)"),
    ("debug_checks", "check the block pool's invariants after every step (slow; off)"),
    ("sliding_window_reclaim", "give back sliding-window KV blocks that left the window (on)"),
    ("null_block", "reserve page 0 as vLLM's null block: N - 1 usable pages (off)"),
    ("admit_whole_prompt", "admit a request only when its whole prompt fits, as vLLM (off)"),
    ("keep_duplicates", "hash a recomputed block's second page too, as vLLM (off)"),
    ("cache_at_schedule", "hash a chunk's blocks when scheduled, so its step shares them (off)"),
)

_METAVARS = {int: "N", float: "X", str: "NAME"}
_SPECIAL_METAVARS = {"cost_model": "FILE", "disk_offload_dir": "DIR", "kv_store": "URL"}


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reference engine (vLLM's flag names)")
    for flag, dest, kind, help_ in _VALUE_FLAGS:
        extra = ("--num-gpu-blocks",) if dest == "num_gpu_blocks" else ()
        metavar = _SPECIAL_METAVARS.get(dest, _METAVARS[kind])
        group.add_argument(
            flag, *extra, dest=dest, type=kind, default=None, metavar=metavar, help=help_
        )
    for flag, dest, choices, help_ in _CHOICE_FLAGS:
        group.add_argument(flag, dest=dest, choices=choices, default=None, help=help_)
    group.add_argument(
        "--model",
        dest="model",
        choices=tuple(PRESETS),
        default=None,
        help="the preset, served under its own name unless --served-model-name says otherwise "
        "(as `vllm serve MODEL` answers to MODEL)",
    )
    for dest, help_ in _BOOL_FLAGS:
        group.add_argument(
            f"--{dest.replace('_', '-')}",
            dest=dest,
            action=argparse.BooleanOptionalAction,
            default=None,
            help=help_,
        )


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    """The flags the user set, over EngineConfig's defaults (invalid values -> EngineError)."""
    dests = [d for _, d, _, _ in _VALUE_FLAGS] + [d for _, d, _, _ in _CHOICE_FLAGS]
    dests += [d for d, _ in _BOOL_FLAGS]
    chosen = {d: getattr(args, d) for d in dests if getattr(args, d, None) is not None}
    if getattr(args, "model", None) is not None:
        chosen.setdefault("preset", args.model)
        chosen.setdefault("served_model_name", args.model)
    return EngineConfig.from_dict(chosen)


_FLAG_OF = {dest: flag for flag, dest, *_ in (*_VALUE_FLAGS, *_CHOICE_FLAGS)}


def engine_flags(options: dict) -> list[str]:
    """`harness serve` flags for EngineConfig fields (vLLM's names): the inverse of
    `engine_config_from_args`, used to start served replicas with a scenario's options."""
    argv: list[str] = []
    for key, value in options.items():
        if value is None:
            continue
        if key in dict(_BOOL_FLAGS):
            name = key.replace("_", "-")
            argv.append(f"--{name}" if value else f"--no-{name}")
        elif key in _FLAG_OF:
            argv += [_FLAG_OF[key], str(value)]
        else:
            raise EngineError(f"engine option {key!r} cannot be passed to a served engine")
    return argv


def register(subparsers) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="serve the reference engine over OpenAI-compatible HTTP",
        description="Serve the reference engine: /v1/completions, /v1/chat/completions, /v1/models, "
        "/health, /metrics. Prints 'serving on URL' once ready; SIGINT/SIGTERM stop it.",
    )
    serve.add_argument(
        "--engine",
        choices=("reference",),
        default="reference",
        help="the engine to serve (only the built-in reference engine)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=8000, help="port; 0 = pick a free one and print it (8000)"
    )
    add_engine_arguments(serve)
    serve.set_defaults(func=_serve)

    engine = subparsers.add_parser("engine", help="reference engine tools")
    tools = engine.add_subparsers(dest="engine_verb", metavar="TOOL")
    tools.required = True
    calibrate = tools.add_parser(
        "calibrate", help="time the torch runner and write a cost model for --runner simulated"
    )
    calibrate.add_argument(
        "--preset", choices=tuple(PRESETS), default=None, help="model size (tiny)"
    )
    calibrate.add_argument("--device", default=None, help=f"{' | '.join(DEVICES)} | cuda:N (auto)")
    calibrate.add_argument("--dtype", choices=tuple(DTYPES), default=None, help="dtype (float32)")
    calibrate.add_argument(
        "--disk-offload-dir",
        default=None,
        metavar="DIR",
        help="where to time the disk tier's block files (the system's temporary folder)",
    )
    add_output(calibrate, "cost model file to write (JSON)", required=True)
    calibrate.set_defaults(func=_calibrate)
    _register_kv_store(subparsers)


def _register_kv_store(subparsers) -> None:
    store = subparsers.add_parser(
        "kv-store",
        help="serve a KV block store that `harness serve --kv-store URL` replicas share",
        description="A content-addressed KV block store on loopback (as Mooncake Store or an "
        "LMCache server): replicas put full blocks and fetch the prefixes they miss. Prints "
        "'kv store on URL' once ready; SIGINT/SIGTERM stop it.",
    )
    store.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    store.add_argument("--port", type=int, default=8100, help="port; 0 = pick a free one (8100)")
    store.add_argument(
        "--capacity-blocks",
        type=int,
        default=1_048_576,
        metavar="N",
        help="blocks held (an LRU; 1,048,576)",
    )
    store.set_defaults(func=_kv_store)


def _kv_store(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise EngineError(f"--port must be in 0..65535, got {args.port}")
    if args.capacity_blocks < 1:
        raise EngineError(f"--capacity-blocks must be >= 1, got {args.capacity_blocks}")
    from harness.serving.kv_store import serve_store

    serve_store(args.host, args.port, args.capacity_blocks, announce=_announce)
    return 0


def _serve(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        from harness.errors import EngineError

        raise EngineError(f"--port must be in 0..65535, got {args.port}")
    config = engine_config_from_args(args)
    from harness.serving.server import serve

    serve(config, args.host, args.port, announce=_announce)
    return 0


def _announce(line: str) -> None:
    print(line, flush=True)


def _calibrate(args: argparse.Namespace) -> int:
    names = ("preset", "device", "dtype", "disk_offload_dir")
    chosen = {k: v for k in names if (v := getattr(args, k)) is not None}
    config = EngineConfig.from_dict(chosen)
    from harness.engine.runners.cost_model import calibrate

    calibrate(config, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
