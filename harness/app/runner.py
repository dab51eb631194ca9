"""`harness run`: one scenario from YAML to report.

Generate or load the trace, start the bundled engine if the scenario asks for it (in-process, or
as local HTTP servers), replay, analyze, write the report, print the summary, and stop everything
that was started, Ctrl-C included. A sweep runs each point into its own sub-folder and ends with a
report across the points (TPGS vs interactivity frontier) and `sweep.json`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness import collector
from harness.app.build import (
    build_trace,
    check_installed,
    open_target,
    replay_config,
    simulated,
    virtual_clock,
)
from harness.app.commands.options import formatted
from harness.app.exporting import watch_run
from harness.app.scenario import Scenario, dump_scenario
from harness.app.verb_output import shown_path, summary_width
from harness.driver.live.signals import Interrupted, interrupt_on_signals
from harness.driver.runfolder import make_run_dir
from harness.errors import InputError
from harness.exit_codes import check_concurrency
from harness.schema import SCENARIO_FILE, TRACE_FILE, RunStatus
from harness.trace.model import Trace

if TYPE_CHECKING:
    from harness.driver.live.stats import ReplayStats
    from harness.export.metrics_server import MetricsServer


@dataclass
class PointResult:
    label: str
    run_dir: Path
    status: str  # the run's RunStatus
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


def run_scenario(
    scenario: Scenario,
    *,
    out: str | Path | None = None,
    quiet: bool = False,
    fmt: str = "table",
    live: MetricsServer | None = None,
    verbose: bool = False,
) -> RunResult:
    """`fmt` is how each point's summary prints: table, markdown (fenced), json (not: the caller
    prints the result as one object); `verbose`: every figure, not the short summary. `live`:
    the endpoint that serves each point's live metrics."""
    run_dir = Path(out) if out else default_run_dir(scenario)
    points = scenario.points()
    for _, point_scenario in points:  # a point that needs torch fails before anything is written
        check_installed(point_scenario)
    if len(points) == 1 and not scenario.sweep:
        point = run_point(scenario, run_dir, quiet=quiet, fmt=fmt, live=live, verbose=verbose)
        return RunResult(run_dir, [point], interrupted=point.status == RunStatus.INTERRUPTED)
    make_run_dir(run_dir)
    dump_scenario(scenario, run_dir / SCENARIO_FILE)
    results: list[PointResult] = []
    for label, point_scenario in points:
        if not quiet:
            print(f"== sweep point {label}", flush=True)
        result = run_point(
            point_scenario, run_dir / label, quiet=quiet, fmt=fmt, live=live, verbose=verbose
        )
        results.append(result)
        if result.status == RunStatus.INTERRUPTED:
            break
    from harness.app.sweep import finish_sweep

    extra = finish_sweep(
        run_dir, results, params=tuple(a.param for a in scenario.sweep), quiet=quiet
    )
    return RunResult(
        run_dir,
        results,
        interrupted=any(r.status == RunStatus.INTERRUPTED for r in results),
        extra=extra,
    )


def run_point(
    scenario: Scenario,
    run_dir: Path,
    *,
    quiet: bool = False,
    fmt: str = "table",
    live: MetricsServer | None = None,
    verbose: bool = False,
) -> PointResult:
    if run_dir.exists() and run_dir.is_dir() and any(run_dir.iterdir()):
        raise InputError(
            "the run folder already exists and is not empty; choose another with -o", path=run_dir
        )
    check_installed(scenario)
    with interrupt_on_signals():
        trace = build_trace(scenario)
    result = replay_point(scenario, trace, run_dir, show_progress=not quiet, live=live)
    try:
        with interrupt_on_signals():
            summary = analyze_point(run_dir, quiet=quiet, fmt=fmt, verbose=verbose)
    except Interrupted as exc:  # the run folder is closed already: only the analysis is lost
        raise Interrupted(
            f"{exc} during the analysis; `harness analyze {run_dir}` redoes it"
        ) from None
    return PointResult(scenario.name, run_dir, result.status, summary)


def replay_point(
    scenario: Scenario,
    trace: Trace,
    run_dir: Path,
    *,
    show_progress: bool,
    live: MetricsServer | None = None,
    run_id: str | None = None,
):
    """One scenario point into `run_dir` (scenario.yaml, trace.jsonl, records, manifest), on the
    event loop both verbs use; watched by `live` (the metrics endpoint) when given; its run id is
    the folder's name unless `run_id` names it."""
    from harness.driver.replay_into import connection_limit, run_blocking

    if live is not None and scenario.execution.backend == "ray":
        raise InputError(
            "live metrics (--metrics-port) watch a local replay; the ray backend's workers "
            "are not watched",
            field="execution.backend",
        )

    make_run_dir(run_dir)  # before any server starts or file is written: one line if it cannot be
    virtual = virtual_clock(scenario)  # refused off the in-process engine before anything runs
    config = replay_config(scenario, run_id or run_dir.name)
    if config.load == "closed":
        limit = scenario.target.max_connections or connection_limit(trace, config)
        check_concurrency(config.concurrency, len(trace.main_sessions), limit)
    stats = None if live is None else watch_run(live, scenario, config, trace)
    try:
        return run_blocking(
            _replay(scenario, trace, config, run_dir, show_progress=show_progress, stats=stats),
            virtual=virtual,
        )
    finally:
        if live is not None:
            live.ended()


def analyze_point(run_dir: Path, *, quiet: bool, fmt: str = "table", verbose: bool = False) -> dict:
    from harness.app.reporting import write_analyses
    from harness.driver.live.steps import step
    from harness.report.brief import brief
    from harness.report.text import summary_table

    with collector.held_back(collector.ANALYSIS_GEN0):
        with step("analysing", show=not quiet):
            analysis = analyze_once(run_dir)
        with step("writing the report", show=not quiet):
            report = write_analyses([analysis])
    summary = analysis.summary
    if not quiet:
        if fmt != "json":  # json: the caller prints the summary as one object
            table = summary_table(summary) if verbose else brief(summary, summary_width())
            print(formatted(fmt, table, summary))
        print(f"report: {shown_path(report)}")
    return dict(summary)  # a sweep's point keeps it as a plain mapping


def analyze_once(run_dir: Path):
    """`harness analyze` (summary.json, histograms.json), its analysis kept for the report: the
    run is read and analysed once, not once more by `write_report` (the same figures: both are
    `analyze` of the folder with no options)."""
    from harness.analysis import histograms
    from harness.analysis.loader import load_run
    from harness.analysis.summary import analyze, write_summary

    analysis = analyze(load_run(run_dir))
    write_summary(analysis.summary, run_dir)
    histograms.write_histograms(analysis.histograms(), run_dir)
    # the report reads the summary the folder now holds, as a fresh load would
    return replace(analysis, run=replace(analysis.run, summary=analysis.summary))


# ---- the replay ------------------------------------------------------------------------------


async def _replay(
    scenario: Scenario,
    trace: Trace,
    config,
    run_dir: Path,
    *,
    show_progress: bool,
    stats: ReplayStats | None = None,
):
    """Start the target, open the run folder, scrape /metrics, replay (here or on Ray), scrape
    again, close the run."""
    from harness.driver.manifest import replay_fields
    from harness.driver.replay_into import replay_into
    from harness.driver.runfolder import RunFolder
    from harness.trace.native import write_trace

    async with open_target(scenario, run_dir, trace, config) as (target, scrape):
        with RunFolder(
            run_dir,
            config.run_id,
            n_gpus=scenario.gpus,
            simulated=simulated(scenario),
            scenario=scenario.name,
            clock="virtual" if virtual_clock(scenario) else "perf_counter",
        ) as folder:
            dump_scenario(scenario, run_dir / SCENARIO_FILE)
            write_trace(trace, run_dir / TRACE_FILE)
            folder.update(
                **replay_fields(
                    trace,
                    config,
                    target=target.describe(),
                    endpoints=target.endpoints,
                    trace_path=run_dir / TRACE_FILE,
                )
            )
            folder.add_server_metrics("before", await scrape())
            if scenario.execution.backend == "ray":
                result = await _replay_on_ray(scenario, trace, target, config, folder)
            else:
                result = await replay_into(
                    folder, trace, target, config, show_progress=show_progress, stats=stats
                )
            folder.add_server_metrics("after", await scrape())
            folder.close(result.status)
    return result


async def _replay_on_ray(scenario: Scenario, trace: Trace, target, config, folder):
    """Shard the sessions over Ray actors; each runs the same driver against the same HTTP target."""
    if not hasattr(target, "config"):
        raise InputError(
            "the ray backend needs an HTTP target (engine mode 'http' or endpoints)",
            field="execution.backend",
        )
    try:
        from harness.distributed.coordinator import replay_distributed_into
    except ImportError as exc:
        raise InputError(
            "the ray backend needs Ray: pip install 'agentic-harness[ray]'",
            field="execution.backend",
        ) from exc
    ex = scenario.execution
    return await replay_distributed_into(
        folder, trace, target.config, config, workers=ex.workers, address=ex.address
    )


def summary_line(result: RunResult) -> str:
    if result.interrupted:
        return f"interrupted: partial results in {result.run_dir}"
    partial = [p.run_dir.name for p in result.points if p.status == RunStatus.PARTIAL]
    if partial:
        return f"done with losses (a load worker died; see manifest.json workers): {result.run_dir}"
    return f"done: {result.run_dir}"
