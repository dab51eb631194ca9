"""The run replayed once as itself, exactly: at its measured sends, no step jitter, then set
beside the run request by request, so a reader sees how many requests found what the server
found and where the replay first parted from it (docs/engine.md, "What-if", exact replay).

The draws' mean (`predict.py`, `Draws`) says how far the model's figures are from the run on
average over step noise; this says whether the model follows the run's own path. Where the pool
is bistable (crowded, thrashing) one request's different hit sends the two apart, and the first
parting is where to look: the request, when it was sent, what each cached.
"""

from __future__ import annotations

import pandas as pd

from harness.whatif.replay import Outcome
from harness.whatif.requests import ReplayRequest


def parting(requests: list[ReplayRequest], outcomes: list[Outcome], records: pd.DataFrame) -> dict:
    """Requests that ended ok in both, how many cached what the run cached, and the first (in
    send order) that did not."""
    measured = records["cached_tokens"]
    compared = same = 0
    first = None
    for r, o in zip(requests, outcomes, strict=True):
        cached = measured.at[r.row]
        if o.cached is None or o.error or pd.isna(cached):
            continue
        compared += 1
        if int(cached) == o.cached:
            same += 1
        elif first is None:
            first = _request(r, int(cached), o.cached)
    out = {"requests_compared": compared, "requests_as_measured": same, "first_parting": first}
    return {**out, "words": _words(first)}


def _request(r: ReplayRequest, measured: int, replayed: int) -> dict:
    return {
        "request": f"{r.session}:{r.turn}",
        "t_sent_s": r.t_sent,
        "measured_cached": measured,
        "replayed_cached": replayed,
    }


def _words(first: dict | None) -> str:
    """The first parting as one line (the terminal's and the report's)."""
    if first is None:
        return "every request cached what the run cached"
    return (
        f"first parts from the run at {first['request']} (sent {first['t_sent_s']:.2f} s): "
        f"measured {first['measured_cached']:,} cached, replayed {first['replayed_cached']:,}"
    )
