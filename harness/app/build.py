"""From a validated Scenario to what a run needs: the trace, the ReplayConfig and the target.

The one translation from the scenario model to the driver's objects, for `harness run` and
`harness replay` alike (the replay's flags are overrides onto a scenario). `open_target` starts
what the scenario asks for (an in-process engine, local `harness serve` processes, or nothing
for external endpoints) and yields the target with a `scrape()` of the servers' prefix-cache
counters, for the manifest's `server_metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from harness.app.scenario import Scenario
from harness.driver.config import ReplayConfig
from harness.driver.context_limit import limit_context
from harness.driver.target import Target
from harness.errors import InputError
from harness.trace.model import Trace

Scrape = Callable[[], Awaitable[list[dict | None] | None]]
DEFAULT_BLOCK_SIZE = 16
METRIC_NAMES = {  # manifest key -> vLLM's Prometheus counter
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "num_preemptions": "vllm:num_preemptions_total",
}
CACHED_BY_SOURCE = "vllm:prompt_tokens_cached_by_source_total"
# Our tiers by vLLM's `source` label values (its CacheHitSource); the reference engine exports
# the same family (harness/serving/exposition.py).
TIER_SOURCES = {
    "device": ("device",),
    "cpu": ("host",),
    "disk": ("disk",),
    "remote": ("p2p", "external_unspecified"),
}
ENGINE_STATS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "cpu_cache_hits",
    "num_preemptions",
    "kv_blocks_full_peak",
    "kv_blocks_sliding_peak",
    "kv_snapshots_total",
    "kv_snapshot_blocks",
)


def build_trace(scenario: Scenario) -> Trace:
    w = scenario.workload
    if w.trace is not None:
        from harness.trace.formats import load_trace

        return load_trace(
            w.trace,
            w.trace_format,
            block_size=w.mooncake_block_size,
            group_sessions=w.group_sessions,
        )
    from harness.trace.generate import generate
    from harness.trace.profile import load_profile

    profile = load_profile(w.profile, overrides=w.overrides)
    return generate(profile, seed=w.seed, sessions=w.sessions, scale=w.scale)


def replay_config(scenario: Scenario, run_id: str) -> ReplayConfig:
    """The scenario's load and sending settings as they are, with what is resolved here."""
    w = scenario.workload
    return ReplayConfig.of(
        scenario.load,
        scenario.target,
        block_size=block_size(scenario),
        salt=secrets.token_hex(4) if w.salt == "auto" else w.salt,
        tokenizer=w.tokenizer,
        seed=w.seed,
        run_id=scenario.run_id or run_id,
    )


def block_size(scenario: Scenario) -> int:
    t = scenario.target
    if t.block_size is not None:
        return t.block_size
    if t.kind == "engine":
        return int(t.engine.options.get("block_size", DEFAULT_BLOCK_SIZE))
    rules = t.cache_rules.resolved(t.api, [e.url for e in t.endpoints])
    return rules.step_tokens() or DEFAULT_BLOCK_SIZE  # a hosted cache's step


def simulated(scenario: Scenario) -> bool:
    t = scenario.target
    return t.kind == "engine" and t.engine.options.get("runner") == "simulated"


def check_installed(scenario: Scenario) -> None:
    """Before anything is written: the torch runner needs torch (the [engine] extra); the CLI turns
    the missing module into one line naming the extra and the runner that needs none."""
    engine = scenario.target.kind == "engine" and not simulated(scenario)
    if engine and importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")


def virtual_clock(scenario: Scenario) -> bool:
    """Whether the scenario runs on simulated time (`target.engine.options.clock: virtual`): the
    driver and in-process engines in this one process, nothing else (checked here, in one line)."""
    t = scenario.target
    if t.kind != "engine" or t.engine.options.get("clock", "wall") != "virtual":
        return False
    field = "target.engine.options.clock"
    if t.engine.mode != "inprocess":
        raise InputError("virtual needs target.engine.mode: inprocess (no servers)", field=field)
    if scenario.execution.backend != "local":
        raise InputError(
            "virtual runs in one process: execution.backend must be local", field=field
        )
    return True


@contextlib.asynccontextmanager
async def open_target(
    scenario: Scenario, run_dir: Path, trace: Trace, config: ReplayConfig
) -> AsyncIterator[tuple[Target, Scrape]]:
    """The target and its /metrics scrape; servers started here are stopped on the way out."""
    async with (
        _local_kv_store(scenario, run_dir) as resolved,
        _open_target(resolved, run_dir, trace, config) as opened,
    ):
        yield opened


@contextlib.asynccontextmanager
async def _local_kv_store(scenario: Scenario, run_dir: Path) -> AsyncIterator[Scenario]:
    """`kv_store: local`: a `harness kv-store` process for this run, its URL in the options."""
    t = scenario.target
    if t.kind != "engine" or t.engine.options.get("kv_store") != "local":
        yield scenario
        return
    from harness.app.scenario import set_path, validate
    from harness.app.servers import LocalKVStore

    store = LocalKVStore(log_dir=run_dir / "servers")
    await asyncio.to_thread(store.start)
    try:
        doc = scenario.to_dict()
        set_path(doc, "target.engine.options.kv_store", store.url)
        yield validate(doc, source="<kv store>")
    finally:
        await asyncio.to_thread(store.stop)


@contextlib.asynccontextmanager
async def _open_target(
    scenario: Scenario, run_dir: Path, trace: Trace, config: ReplayConfig
) -> AsyncIterator[tuple[Target, Scrape]]:
    t = scenario.target
    if t.kind == "engine" and t.engine.mode == "inprocess":
        yield _inprocess_target(scenario)
        return
    if t.kind == "engine":
        from harness.app.servers import LocalServers

        servers = LocalServers(
            dict(t.engine.options), t.engine.replicas, log_dir=run_dir / "servers"
        )
        await asyncio.to_thread(servers.start)
        try:
            model = t.model or t.engine.options.get(
                "served_model_name", "agentic-harness-reference"
            )
            # servers of this run, on this machine: never through the user's proxy
            yield _http_target(scenario, servers.urls, model, trace, config, direct=True)
        finally:
            await asyncio.to_thread(servers.stop)
        return
    if t.model is None:
        raise InputError(
            "endpoint targets need 'model' (the name the server serves)", field="target.model"
        )
    yield _http_target(scenario, [e.url for e in t.endpoints], t.model, trace, config)


def _inprocess_target(scenario: Scenario) -> tuple[Target, Scrape]:
    from harness.driver.engine_target import EngineTarget
    from harness.engine.config import EngineConfig

    t = scenario.target
    target = EngineTarget(
        EngineConfig.from_dict(dict(t.engine.options)),
        replicas=t.engine.replicas,
        ignore_eos=t.send_ignore_eos,
        temperature=t.sampling.temperature,
    )

    async def scrape() -> list[dict | None] | None:
        if not t.scrape_metrics:
            return None
        # An engine not started yet has served nothing: its counters are zero.
        return [
            {
                **(
                    {k: getattr(e.stats(), k) for k in ENGINE_STATS}
                    if e.started
                    else dict.fromkeys(ENGINE_STATS, 0)
                ),
                "cache_block_size": e.config.block_size,
                "cached_by_source": (
                    _engine_tier_hits(e.stats()) if e.started else dict.fromkeys(TIER_SOURCES, 0)
                ),
            }
            for e in target.engines
        ]

    return limit_context(target, t.context_overflow), scrape


def http_target_config(
    scenario: Scenario,
    urls: list[str],
    model: str,
    trace: Trace,
    config: ReplayConfig,
    direct: bool = False,
):
    """The scenario's HTTP settings as validated, with what is resolved here: the endpoints'
    URLs, the model, the key, the connection limit (and the replay's tokenizer); `direct`: no
    proxy (servers this run started)."""
    from harness.driver.http import HTTPTargetConfig
    from harness.driver.replay_into import connection_limit

    t = scenario.target
    return HTTPTargetConfig.of(
        t,
        endpoints=tuple(urls),
        model=model,
        api_key=api_key(scenario),
        max_connections=t.max_connections or connection_limit(trace, config),
        tokenizer=config.tokenizer,
        network=t.network.model_copy(update={"proxy": "none"}) if direct else None,
    )


def _http_target(
    scenario: Scenario,
    urls: list[str],
    model: str,
    trace: Trace,
    config: ReplayConfig,
    direct: bool = False,
) -> tuple[Target, Scrape]:
    from harness.driver.http import HTTPTarget

    target = HTTPTarget(http_target_config(scenario, urls, model, trace, config, direct))

    async def scrape() -> list[dict | None] | None:
        if not scenario.target.scrape_metrics:
            return None
        return [await scrape_metrics(u, target.network) for u in urls]

    return limit_context(target, scenario.target.context_overflow), scrape


def api_key(scenario: Scenario) -> str | None:
    t = scenario.target
    if t.api_key_env:
        key = os.environ.get(t.api_key_env)
        if not key:
            raise InputError(
                f"environment variable {t.api_key_env} is not set or empty",
                field="target.api_key_env",
            )
        return key
    if t.api_key_file:
        try:
            lines = Path(t.api_key_file).read_text().splitlines()
        except OSError as exc:
            raise InputError(
                f"cannot read API key file: {exc.strerror}", path=t.api_key_file
            ) from None
        if not lines or not lines[0].strip():
            raise InputError("API key file is empty", path=t.api_key_file)
        return lines[0].strip()
    return None


async def scrape_metrics(base_url: str, network=None) -> dict | None:
    """vLLM-named prefix-cache (and speculative-decoding) counters from an endpoint's /metrics
    (None if it has none), through the harness's one HTTP client on the run's network."""
    from harness.driver.http import HTTPClient, Network, NetworkSettings, WireError, metrics_url
    from harness.prometheus import cache_block_size, metric_total, spec_decode

    net = network if network is not None else Network(NetworkSettings())
    try:
        async with HTTPClient(net, timeout=10) as http:
            status, body = await http.get(metrics_url(base_url))
    except WireError:
        return None
    if status != 200:
        return None
    text = body.decode("utf-8", "replace")
    counters = {k: metric_total(text, n) for k, n in METRIC_NAMES.items()}
    by_source = None
    if CACHED_BY_SOURCE in text:  # vLLM's and the reference engine's hits by tier
        by_source = {
            tier: sum(metric_total(text, CACHED_BY_SOURCE, source=s) for s in sources)
            for tier, sources in TIER_SOURCES.items()
        }
    # analysis.granularity reads cache_block_size; analysis.cache_tiers cached_by_source;
    # analysis.speculation the spec-decode figures
    return {
        **counters,
        "cache_block_size": cache_block_size(text),
        "cached_by_source": by_source,
        **spec_decode(text),
    }


def _engine_tier_hits(stats) -> dict[str, int]:
    """An in-process engine's hit tokens by tier, as its /metrics would export them."""
    tiers = {t: stats.tiers.get(t, {}).get("hit_tokens", 0) for t in ("cpu", "disk", "remote")}
    return {"device": stats.prefix_cache_hits - sum(tiers.values()), **tiers}
