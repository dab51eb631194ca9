"""The measured server as the what-if replays it: its engine options (the run folder's, the
engine's defaults at the server's cache granularity for another server, what `--server` and
`--like` add), its replicas and routing; and the same server with the what-if's changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.analysis.loader import Run
from harness.engine.config import EngineConfig
from harness.errors import EngineError, InputError

ENGINE_PREFIX = "target.engine.options."
# Engine options that describe how the server ran, not its cache: the replay sets its own.
_REPLAY_OWNS = {"runner": "simulated", "clock": "wall", "sim_time_scale": 0.0, "device": "auto"}
_DROPPED = ("cost_model", "kv_store", "disk_offload_dir", "disk_offload_blocks", "debug_checks")
# A server's own cache rules as engine options (`--like NAME`; `--server` keys override them):
# vLLM 0.32's, each read from its source and checked against its runs (docs/engine.md, "Checked
# on the real vLLM").
LIKE: dict[str, dict[str, Any]] = {
    "vllm": {
        "prefix_cache_retention": "replay+junction",
        "cache_at_schedule": True,
        "free_order": "group",
        "null_block": True,
        "admit_whole_prompt": True,
        "keep_duplicates": True,
    },
}


@dataclass
class Setup:
    """One replayed server: its engine options, replicas and routing."""

    config: EngineConfig
    replicas: int
    routing: str

    def changed(self, changes: dict[str, Any]) -> Setup:
        options, replicas, routing = {}, self.replicas, self.routing
        for key, value in changes.items():
            if key in ("target.engine.replicas", "replicas"):
                replicas = int(value)
            elif key in ("target.routing", "routing"):
                routing = str(value)
            else:
                options[key.removeprefix(ENGINE_PREFIX)] = value
        try:
            return Setup(self.config.replace(**options), replicas, routing)
        except (TypeError, EngineError) as exc:
            raise InputError(f"what-if: {exc}", field="--set") from exc


def base_setup(run: Run, block_size: int, server: dict[str, Any]) -> Setup:
    """The measured server as the replay models it: its engine options, replicas and routing."""
    return Setup(_base_config(run, block_size, server), _replicas(run), _routing(run))


def like_server(server: dict[str, Any], like: str | None) -> dict[str, Any]:
    if like is None:
        return server
    if like not in LIKE:
        raise InputError(f"--like {like!r}: one of {', '.join(LIKE)}", field="--like")
    return {**LIKE[like], **server}


def _base_config(run: Run, block_size: int, server: dict[str, Any]) -> EngineConfig:
    engine = ((run.manifest.get("target") or {}).get("engine")) or {}
    options = {k: v for k, v in engine.items() if k not in _DROPPED}
    if not options:  # another server: the engine's defaults at its granularity
        options = {"block_size": block_size, "max_model_len": 10**9}
    options.update(_REPLAY_OWNS)
    options.update({k.removeprefix(ENGINE_PREFIX): v for k, v in server.items()})
    if options.get("num_gpu_blocks") is None and "kv_cache_memory_gb" not in server and not engine:
        raise InputError(
            "the run folder does not say the server's KV pool: give it as "
            "--server num_gpu_blocks=N (blocks of the server's cache)",
            field="--server",
        )
    try:
        return EngineConfig.from_dict(options)
    except EngineError as exc:
        raise InputError(f"what-if server: {exc}", field="--server") from exc


def _replicas(run: Run) -> int:
    target = run.manifest.get("target") or {}
    return int(target.get("replicas") or len(run.manifest.get("endpoints") or [1]))


def describe(setup: Setup) -> dict:
    c = setup.config
    return {
        "num_gpu_blocks": c.total_blocks,
        "block_size": c.block_size,
        "cpu_offload_blocks": c.cpu_offload_blocks,
        "preset": c.preset,
        "replicas": setup.replicas,
        "routing": setup.routing,
    }


def _routing(run: Run) -> str:
    return str((run.manifest.get("replay") or {}).get("routing") or "session_sticky")
