"""`summary.json`: every headline number of a run under stable, documented keys (docs/metrics.md).

`analyze(run)` computes everything once into an `Analysis` (the report and plots reuse it);
`analyze_run(run_dir)` is what `harness analyze` and `harness run` call: it writes summary.json
and histograms.json into the run folder and returns the summary dict.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import cast

import yaml

from harness.analysis import (
    buffering,
    cache,
    cache_tiers,
    context_limit,
    histograms,
    hosted_cache,
    metrics,
    retries,
    short_replies,
    speculation,
    streamed,
    window,
)
from harness.analysis.cache_parts import cache_parts
from harness.analysis.client_check import client_check, read_client
from harness.analysis.ending import run_ending
from harness.analysis.ideal import rules
from harness.analysis.ideal.walk import Ideal, with_ideal
from harness.analysis.in_flight import in_flight
from harness.analysis.loader import Run, load_run
from harness.analysis.sessions import tasks as sessions
from harness.analysis.slo import Slo, goodput, parse_slos
from harness.analysis.summary_types import (  # noqa: F401 (SUMMARY_VERSION: its readers import it here)
    SUMMARY_VERSION,
    Analysis,
    CacheSummary,
    Counts,
    Excluded,
    ServerCache,
    Sessions,
    Summary,
    Throughput,
    TpgsParts,
    Validity,
    Window,
)
from harness.analysis.tested import network_warnings, what_was_tested
from harness.atomic import write_atomic
from harness.errors import InputError, RunFolderError
from harness.schema import SCENARIO_FILE, SUMMARY_FILE


def analyze(
    run: Run,
    gpus: float | None = None,
    slos: list[Slo] | None = None,
    window_mode: str | None = None,
    block_size: int | None = None,
    tokenizer: str | None = None,
) -> Analysis:
    """Every figure of `run`, which is left as it is (the analysis works on a copy of its
    records). `block_size`: of the ideal prefix cache (default: the server's granularity);
    `tokenizer`: the server's tokenizer folder, to count chat prompts in its tokens."""
    records, ideal = with_ideal(run, block_size, tokenizer)
    records, superseded = retries.split_attempts(records)  # a turn counts by its last attempt
    if "task" not in records:  # the main session each record's task belongs to
        records["task"] = sessions.task_roots(records).to_numpy()
    measured_window = window.measure_window(records, run.replay, window_mode)  # re-marks phases
    run = replace(run, records=records, warnings=(*run.warnings, *ideal.warnings))
    return _analysis(run, ideal, superseded, measured_window, gpus, slos)


def _analysis(run, ideal, superseded, measured_window, gpus, slos) -> Analysis:
    window_s = (measured_window["start_s"], measured_window["end_s"])
    client = client_check(run.records, read_client(run.path), *window_s)
    ok = run.ok
    itl = metrics.itl_of(ok)
    per_request = metrics.request_metrics(ok, itl)
    grain = ideal.granularity
    known = rules.known_rules(run.manifest)  # rules its server's source states
    misses = cache.attribute_misses(ok, grain.block_size, grain.as_dict(), known)
    misses, hosted_rules = hosted_cache.apply(run, ok, misses)  # a hosted API's cache rules
    tables = cache.group_tables(run.measured, ok, misses)
    session_info, tasks, graph = sessions.session_summary(
        run.records, per_request["ttft"], run.trace
    )
    session_info["tasks_complete_by_tool"] = _tool_completed(run.manifest)
    _unknown_completion(session_info, run)
    n_gpus, gpu_source = _n_gpus(run, gpus)
    slos = slos if slos is not None else scenario_slos(run.path)
    rates = metrics.throughput(ok)
    complete = set(tasks.loc[tasks["complete"], "task"])
    duration = rates["duration_s"]
    rates["sessions_per_s"] = len(complete) / duration if duration > 0 else None
    tpgs = metrics.tpgs(ok, n_gpus)
    hit = _without_ideal(cache.hit_rates(misses), ideal, run.manifest)
    overflow = context_limit.context_summary(run)  # requests past the context limit
    # an import's chunks are not its tokens (its notes say so): nothing to place
    placed = None if run.manifest.get("imported") else streamed.token_placement(ok, run.manifest)
    short = short_replies.short_replies(ok, run.replay.api)
    stream = buffering.streaming(ok)
    parts = cache_parts(run, ok, misses, graph, per_request["ttft"], ideal.exact).summary
    summary: Summary = {
        "summary_version": SUMMARY_VERSION,
        "run_id": run.name,
        "simulated": run.simulated,
        "imported": _imported(run.manifest),
        "tested": what_was_tested(run),
        **_counts(run),
        "errors_by_class": metrics.error_counts(run.measured),
        "streamed": placed,
        "short_replies": short,
        "streaming": stream,
        "ttft_s": metrics.percentiles(per_request["ttft"]),
        "tpot_s": metrics.percentiles(per_request["tpot"]),
        "itl_s": metrics.weighted_percentiles(itl.values, itl.weights),
        "e2el_s": metrics.percentiles(per_request["e2el"]),
        "e2el_per_token_s": metrics.percentiles(per_request["e2el_per_token"]),
        "interactivity_tok_s": metrics.percentiles(per_request["interactivity"]),
        "interactivity_p90": metrics.p90_inverse(per_request["tpot"]),
        "e2e_interactivity_p90": metrics.p90_inverse(per_request["e2el_per_token"]),
        "n_gpus": n_gpus,
        "n_gpus_source": gpu_source,
        "tpgs": tpgs["tpgs"],
        "tpgs_parts": TpgsParts(
            cached=tpgs["cached"], uncached_input=tpgs["uncached_input"], output=tpgs["output"]
        ),
        "throughput": cast(Throughput, rates),
        "goodput": goodput(per_request, slos, duration, run.records.loc[ok.index, "task"]),
        "cache_hit_rate": hit["cache_hit_rate"],
        "ideal_cache_hit_rate": hit["ideal_cache_hit_rate"],
        "cache": cast(
            CacheSummary,
            {
                **hit,
                "granularity": grain.as_dict(),
                "server_rules": cache.server_rules(
                    misses, grain.as_dict(), grain.block_size, known
                ),
                "ideal": _ideal_info(ideal),
                "token_space": ideal.token_space,
                "session_moves": cache.session_moves(ok, misses),
                "tiers": cache_tiers.tier_split(ok, run.manifest),
                "hosted": hosted_cache.hosted_summary(ok, misses, hosted_rules),
                **_unknown_ideal_rows(cache.breakdowns(tables), ideal),
                **_unknown_ideal_rows(parts, ideal),  # by segment and by call kind
            },
        ),
        "server_cache": server_cache(run.manifest),
        # context limits (analysis/context_limit.py), spec decoding (speculation.py)
        "context_limit": overflow,
        "validity": cast(Validity, context_limit.validity(overflow)),
        "speculative_decoding": speculation.spec_summary(run.manifest, ok),
        "run_end": {
            "status": run.manifest.get("status"),
            "stopped_by": run.manifest.get("stopped_by"),
            "unsent_requests": run.manifest.get("unsent_requests"),
            "note": run_ending(run.manifest),
        },
        "sessions": cast(Sessions, session_info),
        "retries": retries.retry_summary(run.records, superseded),
        "window": cast(Window, measured_window),
        "timeline": window.timeline(run.records),
        "client": client,
        "warnings": [  # what makes the latencies themselves wrong first: the banner's headline
            *buffering.warnings(stream),
            *network_warnings(run.manifest),
            *run.warnings,
            *(streamed.warnings(placed) if placed else ()),
            *short_replies.warnings(short),
            *window.warnings(measured_window),
            *client["warnings"],
        ],
    }
    return Analysis(
        run,
        ideal,
        per_request,
        itl,
        misses,
        tables,
        tasks,
        graph,
        cast(Summary, _clean(summary)),
        in_flight(run.records),
    )


def analyze_run(
    run_dir: str | Path,
    gpus: float | None = None,
    slos: list[str] | dict | None = None,
    block_size: int | None = None,
    tokenizer: str | None = None,
    window_mode: str | None = None,
) -> Summary:
    """`harness analyze`: summary.json and histograms.json written into the run folder."""
    run = load_run(run_dir)
    parsed = parse_slos(slos) if slos else None
    result = analyze(run, gpus, parsed, window_mode, block_size, tokenizer)
    write_summary(result.summary, run.path)
    histograms.write_histograms(result.histograms(), run.path)
    return result.summary


def _imported(manifest: dict) -> dict | None:
    """A run made by `harness import`: the tool, its export, and what it defines differently."""
    imported = manifest.get("imported")
    if not imported:
        return None
    return {
        "tool": imported.get("tool"),
        "source": imported.get("source"),
        "notes": list(imported.get("notes", [])),
        "ideal": imported.get("ideal"),  # the tool's own ideal hit, with its definition
        "settings": imported.get("settings") or {},
    }


def _tool_completed(manifest: dict) -> int | None:
    """An import's own count of completed sessions (AIPerf's log), where the tool gave one: the
    export alone cannot tell a task that ran all its turns from one cut short."""
    settings = (manifest.get("imported") or {}).get("settings") or {}
    n = settings.get("sessions_completed")
    return n if isinstance(n, int) else None


def _unknown_completion(info: dict, run: Run) -> None:
    """An import without a trace or the tool's own count cannot tell a task that ran all its
    turns from one cut short: its completed tasks are unknown (null), not the tasks whose
    exported requests all succeeded (kept as `tasks_exported_ok`)."""
    unknown = bool(run.manifest.get("imported")) and run.trace is None
    unknown = unknown and info["tasks_complete_by_tool"] is None
    info["tasks_exported_ok"] = info["tasks_complete"]
    if unknown:
        info["tasks_complete"] = None


def _without_ideal(hit: dict, ideal: Ideal, manifest: dict) -> dict:
    """No per-request ideal (an import, no trace): the ideal hit rate is the tool's own figure,
    or null, never the 0 that the missing values would sum to."""
    if ideal.source is not None:
        return hit
    tool = (manifest.get("imported") or {}).get("ideal") or {}
    rate = tool.get("hit_rate")
    return {**hit, "ideal_cache_hit_rate": rate, "ideal_cache_hit_rate_all": rate}


def _unknown_ideal_rows(tables: dict, ideal: Ideal) -> dict:
    """Without a per-request ideal the by-agent/endpoint/turn ideal is unknown, not 0."""
    if ideal.source is not None:
        return tables
    return {
        name: {group: {**row, "ideal_hit_rate": None} for group, row in rows.items()}
        if name.startswith("by_")
        else rows
        for name, rows in tables.items()
    }


def _ideal_info(ideal: Ideal) -> dict:
    """How `cached_tokens_ideal` was obtained: its block size and where the values came from."""
    exact = ideal.exact
    info = {
        "block_size": ideal.granularity.block_size,
        "computed_from": ideal.source,
        "miss_attribution": "exact"
        if exact
        else "approximate: no matching trace, so the shared prefix is unknown: granularity and"
        " prompt-1 cap count as cold, and the ideal hits the server missed as unexplained",
    }
    if not exact:  # what is missing, and what would make the split exact
        info["missing"] = "trace.jsonl: the trace whose prompts these requests sent"
        info["make_exact"] = MAKE_EXACT
    return info


MAKE_EXACT = (
    "replay the workload with the harness, which keeps its trace: harness replay TRACE"
    " --endpoint URL -o RUN (a harness run that lost its trace.jsonl: put it back, then"
    " harness analyze RUN)"
)


def server_cache(manifest: dict) -> ServerCache | None:
    """The servers' own prefix-cache hit rate over the run: Δhits / Δqueries of the /metrics
    counters the run scraped before and after (manifest `server_metrics`); None if not scraped."""
    scraped = manifest.get("server_metrics") or {}
    before, after = scraped.get("before"), scraped.get("after")
    if not before or not after:
        return None
    pairs = [(b, a) for b, a in zip(before, after, strict=False) if b and a]
    if not pairs:
        return None
    queries = sum(a["prefix_cache_queries"] - b["prefix_cache_queries"] for b, a in pairs)
    hits = sum(a["prefix_cache_hits"] - b["prefix_cache_hits"] for b, a in pairs)
    return {
        "queries": queries,
        "hits": hits,
        "hit_rate": hits / queries if queries > 0 else None,
        "endpoints_scraped": len(pairs),
    }


def write_summary(summary: Summary, run_dir: Path) -> Path:
    path = Path(run_dir) / SUMMARY_FILE
    return write_atomic(path, json.dumps(summary, indent=2, sort_keys=False) + "\n")


def _counts(run: Run) -> Counts:
    phases = run.records["phase"].value_counts()
    measured = run.measured
    return {
        "requests_total": int(len(measured)),
        "requests_ok": int((measured["status"] == "ok").sum()),
        # a request the run's own stop cancelled (Ctrl-C, the drain's end) is not a failure
        "requests_failed": int(measured["status"].isin(("error", "timeout")).sum()),
        "requests_cancelled": int((measured["status"] == "cancelled").sum()),
        "requests_excluded": Excluded(
            warmup=int(phases.get("warmup", 0)), cooldown=int(phases.get("cooldown", 0))
        ),
        "status_counts": {
            str(k): int(v) for k, v in measured["status"].value_counts().sort_index().items()
        },
    }


def _n_gpus(run: Run, gpus: float | None) -> tuple[float, str]:
    if gpus is not None:
        if not gpus > 0:
            raise InputError(f"must be > 0, got {gpus}", field="--gpus")
        return float(gpus), "argument"
    value = run.manifest.get("n_gpus")
    if isinstance(value, int | float) and value > 0:
        return float(value), "manifest"
    return 1.0, "default"


def scenario_slos(run_dir: Path) -> list[Slo]:
    """SLOs from the run's resolved scenario (a top-level `slos` mapping), if it names any."""
    path = Path(run_dir) / SCENARIO_FILE
    if not path.is_file():
        return []
    try:
        scenario = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RunFolderError(f"cannot read scenario ({exc})", path=path) from exc
    slos = scenario.get("slos") if isinstance(scenario, dict) else None
    if not slos:
        return []
    if not isinstance(slos, dict):
        raise RunFolderError("must be a mapping like {ttft_p90: 2s}", path=path, field="slos")
    return parse_slos(slos, source=f"{path}: slos")


def _clean(value):
    """JSON-safe: NaN/inf become null, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
