"""The measured window: load held, and warm-up ended by condition rather than by the clock."""

import numpy as np
import pandas as pd

from harness.analysis import window
from harness.analysis.window import SteadyRule


def _records(
    tasks: int, until, hit=lambda t: 0.9, ttft=lambda t: 0.05, step: float = 1.0
) -> pd.DataFrame:
    """`tasks` tasks; task i sends a 0.5 s request every `step` s from 0 until `until(i)`."""
    rows = []
    for i in range(tasks):
        for k, t in enumerate(np.arange(0.0, until(i), step)):
            rows.append(
                {
                    "task": f"t{i}",
                    "session_id": f"t{i}",
                    "turn": k,
                    "t_scheduled": t,
                    "t_sent": t,
                    "t_first_token": t + ttft(t),
                    "t_done": t + 0.5,
                    "status": "ok",
                    "phase": "measure",
                    "prompt_tokens": 1000.0,
                    "prompt_tokens_expected": 1000.0,
                    "cached_tokens": 1000.0 * hit(t),
                    "cached_tokens_ideal": 950.0,
                }
            )
    return pd.DataFrame(rows)


def test_a_held_load_is_reported_held():
    recs = _records(4, lambda i: 100)
    win = window.choose_window(recs, "phases", 4, SteadyRule())
    held = window.load_held(recs, win, 4)
    assert abs(held["tasks_in_flight_mean"] - 4) < 0.05 and abs(held["tasks_held"] - 1) < 0.02
    assert 1.9 < held["requests_in_flight_mean"] < 2.1  # each task has a request out half the time


def test_a_decaying_load_is_flagged():
    recs = _records(4, lambda i: 25 * (i + 1))
    win = window.choose_window(recs, "phases", 4, SteadyRule())
    held = window.load_held(recs, win, 4)
    assert held["tasks_held"] < 0.7
    summary = window.window_summary(win, held, SteadyRule(), 0)
    assert any("not the target 4" in w for w in window.warnings(summary))


def test_steady_window_starts_once_the_hit_rate_settles():
    recs = _records(4, lambda i: 100, hit=lambda t: min(0.9, 0.03 * t))  # warms over 30 s
    win = window.choose_window(recs, "steady", 4, SteadyRule(hold_s=10))
    assert win.stable and 24 <= win.start <= 32 and win.end > 95
    moved = window.apply_window(recs, win)
    assert moved == int((recs["phase"] == "warmup").sum()) > 0
    assert (recs.loc[recs["phase"] == "warmup", "t_sent"] < win.start).all()


def test_never_steady_keeps_the_phases_and_says_why():
    recs = _records(4, lambda i: 100, hit=lambda t: 0.5 + 0.4 * np.sin(t / 3))
    win = window.choose_window(recs, "steady", 4, SteadyRule(hold_s=10))
    assert not win.stable and "hit rate" in win.reason
    assert (win.start, win.end) == (0.0, 99.5) and window.apply_window(recs, win) == 0


def test_timeline_bins_load_and_rolling_hit_rate():
    recs = _records(4, lambda i: 60, hit=lambda t: 0.0 if t < 30 else 0.9)
    tl = window.timeline(recs)
    t = np.array(tl["t"])
    assert (
        len(t) == len(tl["tasks_in_flight"]) == len(tl["hit_rate"]) == len(tl["requests_in_flight"])
    )
    hits = np.array(tl["hit_rate"], dtype=float)
    assert hits[t < 25].max() == 0 and abs(hits[t > 40].min() - 0.9) < 1e-9
    assert np.allclose(np.array(tl["tasks_in_flight"])[(t > 2) & (t < 55)], 4, atol=0.01)
