"""The garbage collector held back while much is allocated and little freed: the one policy.

Used only where a benchmark line shows the gain (figures and commands: docs/measurements/gc.md):
- the replay (`driver/replay_into.py`): what is loaded before the clock starts (the trace, its
  caches, the modules) frozen out of collection, young objects collected every `REALTIME_GEN0`
  allocations on the run clock and `VIRTUAL_GEN0` on simulated time
  (`benchmarks/bench_driver.py --pin --token-delay 0.02 --concurrency 256`: the collector's own
  callbacks ~100 ms of a 6-s run's ~1.5 CPU-s at CPython's default of 700, ~5 ms held back);
- the analysis and report that follow a replay in one process (`harness run`, `harness simulate`):
  `ANALYSIS_GEN0` (`benchmarks/bench_simulate.py`'s 1,800-s command: 9 full collections and
  ~1.7 s of its ~24 CPU-s at the default, 2 and ~0.5 s held back).
A fresh `harness analyze` or `harness report` process, and loading records.parquet, measured the
same either way: none there.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

REALTIME_GEN0 = (
    10_000  # a request's objects live for its whole stream: young collections find them alive
)
VIRTUAL_GEN0 = 50_000  # on simulated time a pause costs no run time
ANALYSIS_GEN0 = 50_000


@contextmanager
def held_back(gen0: int, *, freeze: bool = True) -> Iterator[None]:
    """Young objects collected every `gen0` allocations, and with `freeze`
    what is alive on entry moved out of collection; the collector as it was after, what was
    frozen handed back."""
    thresholds = gc.get_threshold()
    if freeze:
        gc.freeze()
    gc.set_threshold(gen0, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freeze:
            gc.unfreeze()
