"""Stratified draws over the main-session index, so a trace's shape holds its targets at every seed.

Drawn independently per session, the share of 500 main sessions that start subagents has a
binomial spread of ±2.2 points (one standard deviation at 44 %), and the median turn count one
of ±4 %: a ±5 % fidelity tolerance then fails at some seeds by chance alone. Three draws are
instead taken from low-discrepancy sequences over the session index, each with a seeded offset:

- whether main session `i` starts subagents: `floor((i+1)p + u) - floor(ip + u)`, so any first
  `n` sessions have `round(np)` of them, within one;
- how many a parent starts (the `j`-th parent, counted the same way): the Poisson quantile of the
  `j`-th point of a golden-ratio (Weyl) sequence;
- the turn count of main session `i`: the normal quantile of the `i`-th Weyl point.

Everything is a function of (seed, index), so the first N sessions of a longer trace are still an
N-session trace of the same seed, and each session's own random stream is drawn as before.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from scipy.stats import poisson

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_NORMAL = NormalDist()


class Strata:
    def __init__(self, seed: int, probability: float, count_mean: float) -> None:
        self.p, self.count_mean = probability, count_mean
        self.share_at, self.count_at, self.turns_at = np.random.default_rng([seed, 5]).random(3)

    def has_subagents(self, i: int) -> bool:
        return self._parents_before(i + 1) > self._parents_before(i)

    def subagent_count(self, i: int, most: int) -> int:
        """1 + the Poisson(mean - 1) quantile at the parent's own Weyl point."""
        u = _weyl(self.count_at, self._parents_before(i))
        return min(most, 1 + int(poisson.ppf(u, max(self.count_mean - 1.0, 1e-12))))

    def turns_z(self, i: int) -> float:
        """The standard normal quantile of main session `i`'s turn count."""
        return _NORMAL.inv_cdf(_weyl(self.turns_at, i))

    def _parents_before(self, i: int) -> int:
        return math.floor(i * self.p + self.share_at)


def _weyl(offset: float, k: int) -> float:
    """The k-th point of the golden-ratio sequence from `offset`, kept inside (0, 1)."""
    u = (offset + (k + 1) * _GOLDEN) % 1.0
    return min(max(u, 1e-12), 1.0 - 1e-12)
