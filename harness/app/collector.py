"""The garbage collector's settings while a verb analyses a run or draws its report.

Reading the records and rebuilding every prompt's segments allocate millions of objects that live
to the end; drawing the figures allocates many short-lived ones over a heap of modules (pandas,
pyarrow, matplotlib) that never die. CPython's defaults (a young collection every 700 allocations,
full ones as the old generation grows) then spend their time walking objects that outlive the
verb. Where the analysis follows a replay in one process (`harness run`, `harness simulate`) that
was ~7 full collections, ~1.7 s of a 1,800-s quickstart's ~24 s of CPU, freeing nothing; a fresh
`harness analyze` or `harness report` process, with a small heap, measured the same either way
(docs/metrics.md, "The report's cost"), and follows the one policy all the same.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

ANALYSIS_GC_GEN0 = 50_000  # allocations between young-generation collections (CPython: 700)


@contextmanager
def few_collections() -> Iterator[None]:
    """What is alive on entry (the modules, a trace) frozen out of collection, and young objects
    collected 1/70th as often; the collector as it was after, the frozen objects handed back."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(ANALYSIS_GC_GEN0, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
