"""A run's night: the gate that made it, so that runs judged against earlier nights count by night.

A gate's runs share its output folder and are named by it (`harness gate -o results/nightly-D`
writes `nightly-D-b1`, `nightly-D-b2`, ...). Runs of one night share its host load, its server's
warm state and whatever else changed since the night before, so they agree with each other more
than with another night's: their spread is not the spread between nights. Where tonight's runs are
judged against runs of other nights only, the unit of evidence is the night (its runs' mean), and
the band is the spread between nights' means (docs/metrics.md, "Nights"). A run made alone (not by
a gate) is a night of its own, so runs judged one against one are judged as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.analysis.summary_types import Analysis


def night_of(a: Analysis) -> str:
    """The gate folder a run was made in (its run id is `<folder>-<run>`), else the run itself."""
    path = a.run.path.resolve()
    if a.run.name == f"{path.parent.name}-{path.name}":
        return str(path.parent)
    return str(path)


def apart(base: Sequence[str], cand: Sequence[str], history: Sequence[str]) -> bool:
    """Whether the candidate's runs are judged by night: none of its nights is a reference night
    (the baseline's or the history's), and some night holds more than one run (else a night is a
    run, and the run-level rule is the same rule)."""
    reference = {*base, *history}
    if not cand or not reference or reference & set(cand):
        return False
    keys = [*base, *cand, *history]
    return len(set(keys)) < len(keys)


def means(values: np.ndarray, keys: Sequence[str]) -> np.ndarray:
    """Each night's mean figure, nights in the order they first appear."""
    order = list(dict.fromkeys(keys))
    return np.array([values[[k == night for k in keys]].mean() for night in order])


def counts(keys: Sequence[str]) -> np.ndarray:
    """Each night's number of runs, nights in the order they first appear."""
    order = list(dict.fromkeys(keys))
    return np.array([sum(k == night for k in keys) for night in order], dtype=float)


def mean_share(runs: np.ndarray, typical: float) -> float:
    """The variance of the mean of nights of `runs` runs each, in units of one typical night's
    (`typical` runs: the nights the spread was measured on). A night of fewer runs than typical
    is noisier by at most typical / runs (all of a night's variance its runs' own noise), so it
    counts that much; one of more counts as typical (its night effect does not shrink)."""
    return float(np.maximum(1.0, typical / runs).sum()) / runs.size**2
