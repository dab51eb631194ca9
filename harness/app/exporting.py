"""A command's exports: the live metrics endpoint its runs are watched through (`--metrics-port`)
and the MLflow runs its run folders become at the end (`--mlflow-tracking-uri`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import InputError

if TYPE_CHECKING:  # the verbs import this module for its flags: nothing heavy at the top
    from harness.app.scenario import Scenario
    from harness.driver.config import ReplayConfig
    from harness.driver.live.stats import ReplayStats
    from harness.export.metrics_server import MetricsServer
    from harness.trace.model import Trace


@contextmanager
def exports(args: argparse.Namespace) -> Iterator[MetricsServer | None]:
    """The command's metrics endpoint while its runs go (None without --metrics-port); first,
    with --mlflow-tracking-uri, that MLflow is installed (one line now, not after the runs)."""
    if getattr(args, "mlflow_tracking_uri", None) is not None:
        import harness.export.mlflow_runs  # noqa: F401
    port = getattr(args, "metrics_port", None)
    if port is None:
        yield None
        return
    if not 0 <= port <= 65535:
        raise InputError(f"a port from 0 to 65535, got {port}", field="--metrics-port")
    from harness.export.metrics_server import MetricsServer

    server = MetricsServer(args.metrics_host, port)
    print(f"harness: metrics: serving {server.url}", file=sys.stderr, flush=True)
    try:
        yield server
    finally:
        server.close()


def watch_run(
    server: MetricsServer, scenario: Scenario, config: ReplayConfig, trace: Trace
) -> ReplayStats:
    """The live counters of one run, watched by `server` (what its series are labelled with)."""
    from harness.driver.live.stats import ReplayStats
    from harness.export.run_metrics import RunLabels
    from harness.trace.stats import ideal_cache_hit

    t = scenario.target
    runner = t.engine.options.get("runner", "torch") if t.kind == "engine" else None
    labels = RunLabels(
        run_id=config.run_id,
        api=config.api,
        scenario=scenario.name,
        target=f"engine:{runner}" if runner else t.kind,
        model=t.model or "",
        load=config.load,
        concurrency=config.concurrency if config.load == "closed" else None,
        ideal_hit=ideal_cache_hit(trace, config.block_size),
    )
    stats = ReplayStats()
    server.run(labels).attach(stats)
    return stats


def mlflow_at_end(args: argparse.Namespace, run_dirs: Sequence[Path]) -> None:
    """`--mlflow-tracking-uri`: each finished run folder logged (re-logged ones updated)."""
    uri = getattr(args, "mlflow_tracking_uri", None)
    if uri is None:
        return
    from harness.app.commands.export import export_to_mlflow
    from harness.export.mlflow_runs import DEFAULT_EXPERIMENT

    experiment = args.mlflow_experiment or DEFAULT_EXPERIMENT
    for line in export_to_mlflow(list(run_dirs), uri, experiment):
        print(f"harness: mlflow: {line}", file=sys.stderr)
