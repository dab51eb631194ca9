"""A parent's subagent count is 1 + the Poisson quantile at its own point of the sequence."""

from scipy.stats import poisson

from harness.trace.strata import Strata, _weyl


def test_subagent_counts_are_scipys():
    for seed in range(40):
        strata = Strata(seed, 0.44, 2.6)
        for j in range(300):
            u = _weyl(strata.count_at, strata._parents_before(j))
            expected = min(8, 1 + int(poisson.ppf(u, 1.6)))
            assert strata.subagent_count(j, 8) == expected >= 1
