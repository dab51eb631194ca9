"""The paired differences corrected for the two runs' CPU waits: a pair whose candidate waited
more is slower for that reason alone; the correction takes it out, and leaves a real slowdown."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.compare import noise
from harness.analysis.compare.changes import (
    INCONCLUSIVE,
    NO_CHANGE,
    REGRESSED,
    Figures,
    Threshold,
    row,
)
from harness.analysis.compare.sides import HEADLINE

TPOT_P50 = next(m for m in HEADLINE if m.key == "tpot_p50")
# each pair's two wait shares, drawn as a shared 2-core host gives them (0.2-0.7), and a CPU-bound
# figure that stretches with them: log(figure) = log(base) + stretch(wait) + a little noise
WAIT_A = [0.2, 0.6, 0.3, 0.5, 0.7, 0.25, 0.45, 0.35]
WAIT_B = [0.6, 0.2, 0.5, 0.3, 0.3, 0.65, 0.2, 0.55]
NOISE = np.array([0.01, -0.02, 0.015, 0.0, -0.01, 0.02, -0.015, 0.005])


def _logs(waits: list[float], slowdown: float, noise_: np.ndarray) -> np.ndarray:
    return np.log(0.05) + np.array([noise.stretch(w) for w in waits]) + np.log(slowdown) + noise_


def _row(slowdown: float, waits_b=WAIT_B, n: int = 8):
    a = _logs(WAIT_A[:n], 1.0, NOISE[:n])
    b = _logs(waits_b[:n], slowdown, -NOISE[:n][::-1])
    fa = Figures(list(np.exp(a)), [None] * n, 100 * n, n, WAIT_A[:n])
    fb = Figures(list(np.exp(b)), [None] * n, 100 * n, n, list(waits_b[:n]))
    threshold = Threshold("tpot_p50", True, 0.10, True)
    return row(TPOT_P50, fa, fb, [], threshold, 0.0125, 0.02, paired=True)


def test_stretch_is_the_log_of_the_time_a_cpu_bound_step_takes():
    assert noise.stretch(0.0) == 0.0
    assert noise.stretch(0.5) == pytest.approx(np.log(2))
    assert np.isfinite(noise.stretch(1.0))  # clipped, never infinite


def test_the_correction_takes_out_the_waits_and_leaves_a_30_percent_slowdown():
    slowed, same = _row(1.3), _row(1.0)
    assert "corrected for CPU waits" in slowed.band_source
    assert slowed.verdict == REGRESSED and slowed.change > 0.1
    assert same.verdict == NO_CHANGE  # the waits alone would have moved it by up to +/-100 %


def test_the_fit_recovers_the_effect_at_equal_contention():
    waits_b = [w + 0.05 for w in WAIT_B]  # the candidate waited more: the raw change is larger
    a = _logs(WAIT_A, 1.0, np.zeros(8))
    b = _logs(waits_b, 1.3, np.zeros(8))
    s = noise.adjusted_spread(a, b, (WAIT_A, waits_b), ([None] * 8, [None] * 8), 0.05)
    assert s is not None and s.change == pytest.approx(np.log(1.3), abs=1e-9)
    assert float((b - a).mean()) > s.change  # the waits explained part of the raw difference
    plain = noise.paired_spread(a, b, ([None] * 8, [None] * 8), 0.05)
    assert plain.half_width > 10 * s.half_width  # without it the waits are the noise


def test_a_correction_never_adds_to_the_raw_difference():
    """The torch A/A false alarm: a candidate slower in the raw pairs (+14.6 %) although it
    waited less, extrapolated to equal contention slower still (+22.7 %), its interval clear of
    0 from 6 pairs. The change is held to the raw mean, whose interval holds 0: not regressed."""
    waits_a = [0.55, 0.6, 0.5, 0.45, 0.65, 0.5]
    waits_b = [0.3, 0.5, 0.45, 0.45, 0.4, 0.55]  # the candidate waited less, mostly
    x = np.array(
        [noise.stretch(c) - noise.stretch(w) for w, c in zip(waits_a, waits_b, strict=True)]
    )
    d = np.log(1.146) + 0.4 * (x - x.mean()) + np.array([0.025, -0.16, 0.143, -0.043, 0.023, 0.013])
    fitted = np.polyfit(x, d, 1)[1]  # the change at equal contention, unguarded
    assert fitted > d.mean() > 0
    a = np.zeros(6)
    s = noise.adjusted_spread(a, a + d, (waits_a, waits_b), ([None] * 6, [None] * 6), 0.05)
    assert s is not None and s.change == pytest.approx(float(d.mean()))
    assert fitted - s.half_width > 0 > s.change - s.half_width  # unguarded: called; held: not


def test_uncorrected_below_six_pairs_or_without_waits_or_with_nothing_to_fit():
    few = _row(1.3, n=5)
    assert "corrected" not in few.band_source and few.band_source == "paired over 5 pairs"
    a, b = _logs(WAIT_A, 1.0, NOISE), _logs(WAIT_B, 1.0, NOISE)
    none = ([None] * 8, [None] * 8)
    assert noise.adjusted_spread(a, b, (WAIT_A, [None] * 8), none, 0.05) is None
    assert noise.adjusted_spread(a, b, (WAIT_A, WAIT_A), none, 0.05) is None  # equal waits


def test_a_slowdown_hidden_in_the_waits_is_not_invented():
    # the candidate waited more in every pair and is slower by exactly that: no regression
    same = _row(1.0, waits_b=[w + 0.2 for w in WAIT_A])
    assert same.verdict in (NO_CHANGE, INCONCLUSIVE) and same.verdict != REGRESSED


def test_a_correction_that_turns_a_faster_candidate_slower_is_never_regressed():
    """Where the fitted slope flips the raw pairs' sign (the candidate 5 % faster in the raw
    pairs, +15 % once extrapolated to equal contention), the interval reaches the raw mean."""
    waits_b = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45]
    waits_a = [0.7] * 8  # the baseline waited more in every pair: no pair near equal contention
    x = np.array(
        [noise.stretch(c) - noise.stretch(w) for w, c in zip(waits_a, waits_b, strict=True)]
    )
    d = -0.05 + (x - x.mean()) + NOISE * 0.1  # slope 1, raw mean -5 %
    a = np.zeros(8)
    s = noise.adjusted_spread(a, a + d, (waits_a, waits_b), ([None] * 8, [None] * 8), 0.05)
    assert s is not None and s.change > 0.1  # the fit alone would call +15 %
    assert s.change - s.half_width <= float(d.mean()) < 0  # the interval reaches the raw -5 %
