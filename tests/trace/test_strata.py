"""The Poisson quantile the strata sum themselves is scipy's, point for point."""

import numpy as np
import pytest
from scipy.stats import poisson

from harness.trace.strata import Strata, _weyl, poisson_quantile


@pytest.mark.parametrize("mu", [1e-12, 0.3, 1.0, 1.7, 2.5, 4.0, 9.0, 30.0, 99.0, 250.0])
def test_poisson_quantile_is_scipys(mu):
    u = np.random.default_rng(7).random(4000) * (1 - 2e-12) + 1e-12
    u = np.concatenate([u, [1e-12, 1.0 - 1e-12, 0.5]])
    ours = [poisson_quantile(float(x), mu) for x in u]
    assert ours == [int(q) for q in poisson.ppf(u, mu)]


def test_subagent_counts_are_scipys():
    for seed in range(40):
        strata = Strata(seed, 0.44, 2.6)
        for j in range(300):
            u = _weyl(strata.count_at, j)
            expected = min(8, 1 + int(poisson.ppf(u, 1.6)))
            assert min(8, 1 + poisson_quantile(u, 1.6)) == expected
            assert strata.subagent_count(j, 8) >= 1
