"""The analyzer's computations: a run folder in, an `Analysis` (figures, tables, summary.json) out.

This package computes and never presents: no plotting library is imported here, and nothing
here imports `harness.report`, which draws and prints what an `Analysis` holds. Rooms:

    run.py, records.py, parquet.py   the loader: a run folder -> `Run` (reads, never computes)
    summary.py                       `analyze(run)`: a pure function -> `Analysis`, summary.json
    metrics.py, slo.py, window.py,   per-request latency and rates, SLOs and goodput, the
    retries.py, histograms.py,       measured window, retried turns, HDR histograms, the
    client_check.py, cache.py        driver's self-check, cache hits and misses by cause
    ideal/                           the ideal prefix cache from trace + records, in server units
    sessions/                        tasks: spawn/join graphs, critical paths, completion
    compare/                         baseline vs run, trends over runs
    frontier.py                      the throughput-interactivity Pareto frontier
"""
