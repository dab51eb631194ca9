"""Paired judgement of interleaved runs: within-pair log ratios cancel a host that drifts between
pairs, so a +30 % slowdown the unpaired rule cannot see is regressed; same-config pairs never are;
and one host screen serves both the gate and the history."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.compare import noise
from harness.analysis.compare.changes import REGRESSED, Figures, Threshold, row
from harness.analysis.compare.history import screen
from harness.analysis.compare.sides import HEADLINE
from harness.analysis.compare.verdict import judge_analyses
from harness.analysis.host_state import busy_reason
from harness.analysis.loader import load_runs
from harness.analysis.summary import analyze
from harness.report.compare import render_table

NIGHTS = Path(__file__).parent / "fixtures" / "nightly"
GATE = "ttft_p90:+10%,tpgs:-5%,cache_hit_rate:-0.02"
TTFT_P90 = next(m for m in HEADLINE if m.key == "ttft_p90")

# A host that drifts between cycles (log SD about 0.6, like the calibration's busy machine) and a
# little noise within each pair; the candidate is 30 % slower in every pair.
DRIFT = np.array([0.0, 0.9, -0.6, 0.4])
NOISE_A = np.array([0.02, -0.03, 0.01, 0.00])
NOISE_B = np.array([-0.01, 0.02, 0.03, -0.02])


def _figures(values: np.ndarray) -> Figures:
    return Figures(list(np.exp(values)), [None] * values.size, 100 * values.size, values.size)


def _drifting(slowdown: float) -> tuple[Figures, Figures]:
    base = np.log(0.5) + DRIFT + NOISE_A
    cand = np.log(0.5 * slowdown) + DRIFT + NOISE_B
    return _figures(base), _figures(cand)


def _judged(slowdown: float, paired: bool):
    base, cand = _drifting(slowdown)
    limit = Threshold("ttft_p90", True, 0.10, True)
    return row(TTFT_P90, base, cand, [], limit, 0.05, 0.02, paired=paired)


def test_pairs_see_a_30_percent_slowdown_under_a_drift_the_unpaired_rule_misses():
    unpaired, paired = _judged(1.3, paired=False), _judged(1.3, paired=True)
    assert unpaired.verdict != REGRESSED  # the drift (log SD ~0.6) swamps +30 %
    assert paired.verdict == REGRESSED
    assert paired.band_source == "paired over 4 pairs"
    assert paired.interval is not None and paired.interval[0] > 0.10
    assert unpaired.interval is not None and unpaired.interval[0] < 0


def test_paired_spread_is_a_t_interval_over_the_differences():
    base, cand = np.log([1.0, 2.0, 0.5]), np.log([1.1, 2.3, 0.55])
    s = noise.paired_spread(base, cand, ([None] * 3, [None] * 3), 0.05)
    d = cand - base
    assert s.change == pytest.approx(d.mean())
    from scipy import stats

    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    assert s.half_width == pytest.approx(half)
    assert s.band.df == 2 and s.band.pairs == 3
    assert s.band.sd == pytest.approx(d.std(ddof=1) / np.sqrt(2))


def test_no_slowdown_under_the_drift_is_not_regressed_and_rules_out_the_threshold():
    same = _judged(1.0, paired=True)
    assert same.verdict == "no change detected"


def test_paired_sides_must_match():
    with pytest.raises(ValueError, match="as many a side"):
        noise.paired_spread(np.zeros(3), np.zeros(2), ([], []), 0.05)


@pytest.fixture(scope="module")
def nights():
    runs = load_runs([str(NIGHTS / f"night{n}") for n in (1, 2, 3)])
    return [analyze(r) for r in runs]


@pytest.mark.slow
def test_same_config_nights_in_pairs_are_never_regressed(nights):
    for x, y, z in itertools.permutations(nights):
        j = judge_analyses([x, y, z], [y, z, x], fail_on=GATE, paired=True)
        assert str(j.verdict) != "regressed", [a.run.name for a in (x, y, z)]
        assert j.paired
        gated = [r for r in j.rows if r.gated and r.verdict is not None]
        assert gated and all(r.band_source == "paired over 3 pairs" for r in gated)
    text = render_table(j)
    assert "interleaved pairs" in text and "paired over 3 pairs" in text


@pytest.mark.slow
def test_one_host_screen_for_the_gate_and_the_history(nights):
    quiet_cause = {"cause": "host", "warnings": []}  # computed, but nothing was late
    warned = {"cause": "host", "warnings": ["late sends"]}
    assert busy_reason({"client": quiet_cause}) is None
    assert busy_reason({"client": warned}) == "host busy: the client self-check blamed the host"
    kept = replace(nights[1], summary={**nights[1].summary, "client": quiet_cause})
    left = replace(nights[2], summary={**nights[2].summary, "client": warned})
    s = screen([kept, left], [nights[0]])
    assert [a.run.name for a in s.kept] == [nights[1].run.name]
    assert s.left_out == [(nights[2].run.name, busy_reason({"client": warned}))]
