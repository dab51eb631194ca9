"""`harness run`: one scenario from YAML to report.

Generate or load the trace, start the bundled engine if the scenario asks for it (in-process, or
as local HTTP servers), replay, analyze, write the report, print the summary, and stop everything
that was started, Ctrl-C included. A sweep runs each point into its own sub-folder and ends with a
report across the points (TPGS vs interactivity frontier) and `sweep.json`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import InputError
from harness.scenario import Scenario, dump_scenario
from harness.schema import MANIFEST_FILE, TRACE_FILE
from harness.trace.model import Trace


@dataclass
class PointResult:
    label: str
    run_dir: Path
    status: str  # the replay's: complete | interrupted | ...
    summary: dict = field(default_factory=dict)


@dataclass
class RunResult:
    run_dir: Path
    points: list[PointResult]
    interrupted: bool = False
    extra: dict = field(default_factory=dict)  # sweep-level results (frontier, saturation)


def default_run_dir(scenario: Scenario) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(scenario.results_dir) / f"{stamp}-{scenario.name}-{secrets.token_hex(3)}"


def run_scenario(scenario: Scenario, *, out: str | Path | None = None, quiet: bool = False) -> RunResult:
    run_dir = Path(out) if out else default_run_dir(scenario)
    points = scenario.points()
    if len(points) == 1 and not scenario.sweep:
        point = run_point(scenario, run_dir, quiet=quiet)
        return RunResult(run_dir, [point], interrupted=point.status == "interrupted")
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_scenario(scenario, run_dir / "scenario.yaml")
    results: list[PointResult] = []
    for label, point_scenario in points:
        if not quiet:
            print(f"== sweep point {label}", flush=True)
        result = run_point(point_scenario, run_dir / label, quiet=quiet)
        results.append(result)
        if result.status == "interrupted":
            break
    from harness.sweep import finish_sweep

    extra = finish_sweep(run_dir, results, params=tuple(a.param for a in scenario.sweep), quiet=quiet)
    return RunResult(run_dir, results, interrupted=any(r.status == "interrupted" for r in results), extra=extra)


def run_point(scenario: Scenario, run_dir: Path, *, quiet: bool = False) -> PointResult:
    if run_dir.exists() and any(run_dir.iterdir()):
        raise InputError("the run folder already exists and is not empty; choose another with -o", path=run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_scenario(scenario, run_dir / "scenario.yaml")
    trace = build_trace(scenario)
    from harness.trace.native import write_trace

    write_trace(trace, run_dir / TRACE_FILE)
    status = asyncio.run(_replay(scenario, trace, run_dir, quiet=quiet))
    return PointResult(scenario.name, run_dir, status, analyze_point(scenario, run_dir, quiet=quiet))


def build_trace(scenario: Scenario) -> Trace:
    w = scenario.workload
    if w.trace is not None:
        from harness.trace.formats import load_trace

        return load_trace(w.trace, w.trace_format)
    from harness.trace.generate import generate
    from harness.trace.profile import load_profile

    profile = load_profile(w.profile, overrides=w.overrides)
    return generate(profile, seed=w.seed, sessions=w.sessions, scale=w.scale)


def analyze_point(scenario: Scenario, run_dir: Path, *, quiet: bool) -> dict:
    from harness.analysis.report import write_report
    from harness.analysis.summary import analyze_run, write_summary
    from harness.analysis.table import summary_table

    summary = analyze_run(run_dir, gpus=scenario.gpus)
    server = _server_side_cache(run_dir)
    if server is not None:
        summary["server_cache"] = server
        write_summary(summary, run_dir)
    report = write_report([run_dir])
    if not quiet:
        print(summary_table(summary))
        if server is not None and server.get("hit_rate") is not None:
            client = summary.get("cache_hit_rate")
            client = "-" if client is None else f"{client:.4f}"
            print(f"server-side prefix cache hit rate (from /metrics): {server['hit_rate']:.4f}"
                  f"  (client-side: {client})")
        print(f"report: {report}")
    return summary


# ---- the replay ------------------------------------------------------------------------------


async def _replay(scenario: Scenario, trace: Trace, run_dir: Path, *, quiet: bool) -> str:
    from harness.driver.run import run_replay

    config = replay_config(scenario, run_dir.name)
    async with _target(scenario, run_dir) as (target, scrape):
        before = await scrape()
        extra = {"n_gpus": scenario.gpus, "simulated": _simulated(scenario), "scenario": scenario.name}
        if scenario.execution.backend == "ray":
            result = await _replay_on_ray(scenario, trace, target, config, run_dir, extra)
        else:
            result = await run_replay(
                trace, target, config, run_dir, trace_path=run_dir / TRACE_FILE,
                show_progress=not quiet and os.isatty(1), manifest_extra=extra,
            )
        after = await scrape()
    _add_to_manifest(run_dir, {"server_metrics": {"before": before, "after": after}})
    return result.status


async def _replay_on_ray(scenario: Scenario, trace: Trace, target, config, run_dir: Path, extra: dict):
    """Shard the sessions over Ray actors; each runs the same driver against the same HTTP target."""
    if not hasattr(target, "config"):
        raise InputError("the ray backend needs an HTTP target (engine mode 'http' or endpoints)",
                         field="execution.backend")
    try:
        from harness.distributed import run_replay_distributed
    except ImportError as exc:
        raise InputError("the ray backend needs Ray: pip install 'agentic-harness[ray]'",
                         field="execution.backend") from exc
    ex = scenario.execution
    return await run_replay_distributed(
        trace, target.config, config, run_dir, workers=ex.workers, address=ex.address,
        trace_path=run_dir / TRACE_FILE, manifest_extra=extra,
    )


def replay_config(scenario: Scenario, run_id: str):
    from harness.driver.config import ReplayConfig

    load, t = scenario.load, scenario.target
    salt = secrets.token_hex(4) if scenario.workload.salt == "auto" else scenario.workload.salt
    block = t.engine.options.get("block_size", 16) if t.kind == "engine" else 16
    return ReplayConfig(
        load=load.mode, concurrency=load.concurrency, session_rate=load.session_rate,
        arrival=load.arrival, time_scale=load.time_scale, max_sessions=load.max_sessions,
        max_requests=load.max_requests, max_duration=load.max_duration_s,
        warmup_s=load.warmup_s, warmup_requests=load.warmup_requests, cooldown_s=load.cooldown_s,
        history=load.history, api=t.api, prompt_format=t.prompt_format, routing=t.routing,
        block_size=block, salt=salt, tokenizer=scenario.workload.tokenizer, seed=scenario.workload.seed,
        run_id=run_id,
    )


def _simulated(scenario: Scenario) -> bool:
    t = scenario.target
    return t.kind == "engine" and t.engine.options.get("runner") == "simulated"


@contextlib.asynccontextmanager
async def _target(scenario: Scenario, run_dir: Path):
    t = scenario.target
    if t.kind == "engine" and t.engine.mode == "inprocess":
        from harness.driver.engine_target import EngineTarget
        from harness.engine.config import EngineConfig

        target = EngineTarget(EngineConfig.from_dict(dict(t.engine.options)), replicas=t.engine.replicas,
                              ignore_eos=t.send_ignore_eos)

        async def scrape() -> list[dict] | None:
            if not t.scrape_metrics:
                return None
            # An engine not started yet has served nothing: its counters are zero.
            return [_stats_dict(e.stats()) if e.started else dict.fromkeys(_STAT_KEYS, 0)
                    for e in target.engines]

        yield target, scrape
        return
    if t.kind == "engine":
        from harness.servers import LocalServers

        servers = LocalServers(dict(t.engine.options), t.engine.replicas, log_dir=run_dir / "servers")
        await asyncio.to_thread(servers.start)
        try:
            model = t.model or t.engine.options.get("served_model_name", "agentic-harness-reference")
            yield _http_target(scenario, servers.urls, model)
        finally:
            await asyncio.to_thread(servers.stop)
        return
    urls = [e.url for e in t.endpoints]
    if t.model is None:
        raise InputError("endpoint targets need 'model' (the name the server serves)", field="target.model")
    yield _http_target(scenario, urls, t.model)


def _http_target(scenario: Scenario, urls: list[str], model: str):
    from harness.driver.openai_http import HTTPTargetConfig, OpenAIHTTPTarget
    from harness.driver.target import Timeouts

    t = scenario.target
    config = HTTPTargetConfig(
        endpoints=tuple(urls), model=model, api=t.api, api_key=_api_key(scenario),
        headers=tuple(t.headers.items()), min_tokens=t.send_min_tokens, ignore_eos=t.send_ignore_eos,
        timeouts=Timeouts(total=scenario.load.timeout_s, ttft=scenario.load.timeout_s),
        max_connections=4096,
    )
    target = OpenAIHTTPTarget(config)

    async def scrape() -> list[dict] | None:
        if not t.scrape_metrics:
            return None
        return [await _scrape_metrics(u) for u in urls]

    return target, scrape


def _api_key(scenario: Scenario) -> str | None:
    t = scenario.target
    if t.api_key_env:
        key = os.environ.get(t.api_key_env)
        if not key:
            raise InputError(f"environment variable {t.api_key_env} is not set", field="target.api_key_env")
        return key
    if t.api_key_file:
        try:
            return Path(t.api_key_file).read_text().strip()
        except OSError as exc:
            raise InputError(f"cannot read API key file: {exc.strerror}", field="target.api_key_file") from None
    return None


async def _scrape_metrics(base_url: str) -> dict | None:
    """vLLM-named prefix-cache counters from an endpoint's /metrics (None if it has none)."""
    import aiohttp

    from harness.prometheus import metric_total

    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http, \
                http.get(f"{root}/metrics") as resp:
            if resp.status != 200:
                return None
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError):
        return None
    names = {"prefix_cache_queries": "vllm:prefix_cache_queries_total",
             "prefix_cache_hits": "vllm:prefix_cache_hits_total",
             "num_preemptions": "vllm:num_preemptions_total"}
    return {k: metric_total(text, n) for k, n in names.items()}


_STAT_KEYS = ("prefix_cache_queries", "prefix_cache_hits", "cpu_cache_hits", "num_preemptions",
              "kv_blocks_full_peak", "kv_blocks_sliding_peak", "kv_snapshots_total", "kv_snapshot_blocks")


def _stats_dict(stats) -> dict:
    return {k: getattr(stats, k) for k in _STAT_KEYS}


def _server_side_cache(run_dir: Path) -> dict | None:
    """Server-reported hit rate over the run: Δhits / Δqueries of the scraped counters."""
    manifest = json.loads((run_dir / MANIFEST_FILE).read_text())
    scraped = manifest.get("server_metrics") or {}
    before, after = scraped.get("before"), scraped.get("after")
    if not before or not after:
        return None
    pairs = [(b, a) for b, a in zip(before, after, strict=False) if b and a]
    if not pairs:
        return None
    queries = sum(a["prefix_cache_queries"] - b["prefix_cache_queries"] for b, a in pairs)
    hits = sum(a["prefix_cache_hits"] - b["prefix_cache_hits"] for b, a in pairs)
    return {"queries": queries, "hits": hits, "hit_rate": hits / queries if queries > 0 else None,
            "endpoints_scraped": len(pairs)}


def _add_to_manifest(run_dir: Path, extra: dict) -> None:
    path = run_dir / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    manifest.update(extra)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(path)


def summary_line(result: RunResult) -> str:
    if result.interrupted:
        return f"interrupted: partial results in {result.run_dir}"
    partial = [p.run_dir.name for p in result.points if p.status == "partial"]
    if partial:
        return f"done with losses (a load worker died; see manifest.json workers): {result.run_dir}"
    return f"done: {result.run_dir}"

