"""The run replayed once as itself, exactly: at its measured sends and on its own clock, then set
beside the run request by request, so a reader sees how many requests found what the server
found and where the replay first parted from it (docs/engine.md, "What-if", exact replay).

The draws' mean (`predict.py`, `Draws`) says how far the model's figures are from the run on
average over step noise, with every step's time the fitted model's; this takes the time model
out as well. On the run's clock (`RunClock`) each replayed step ends where the run's next step
ended, so a send lands in the step it landed in on the server and a request finishes in the
step it finished in, and what is left of the difference is the cache model's and the
scheduler's: which request is admitted, which blocks it finds, which are evicted. Where the
pool is bistable (crowded, thrashing) a step that ends a little earlier or later than the
server's decides what a request finds, and the run's clock is what keeps the replay on the
run's path (vLLM runs: docs/measurements/whatif-vllm.md). Where it still parts, the first
parting is where to look: the request, when it was sent, what each cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.whatif.replay import Outcome
from harness.whatif.requests import ReplayRequest
from harness.whatif.steps import step_ends

_AFTER_S = 1e-6  # records are stamped to the microsecond


@dataclass(frozen=True)
class RunClock:
    """The run's steps as the replay's clock: a replayed step starting at `start` ends at the
    first of the run's step ends after it (`steps.step_ends`), however long the model would
    have taken; after the run's last step, in the model's time. It keeps the model's seconds
    over the run's for every step it ended: how far the model's own step times were from the
    server's, which the clock otherwise hides (a model that priced prefill wrong, or took other
    steps than the server, still replays in step with it)."""

    ends: np.ndarray
    ratios: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, ok: pd.DataFrame) -> RunClock:
        return cls(step_ends(ok))

    def __call__(self, start: float, seconds: float) -> float:
        i = int(np.searchsorted(self.ends, start + _AFTER_S, side="right"))
        if i == len(self.ends):
            return seconds
        taken = float(self.ends[i] - start)
        self.ratios.append(seconds / taken)
        return taken

    def model_over_run(self) -> dict | None:
        """The model's step seconds over the run's, at the 5th, 50th and 95th percentile."""
        if not self.ratios:
            return None
        p5, p50, p95 = np.percentile(self.ratios, [5, 50, 95])
        return {"p5": float(p5), "p50": float(p50), "p95": float(p95)}

    def words(self) -> str:
        if not len(self.ends):
            return "the fitted model's step times (the run's streams show no steps)"
        return (
            f"the run's own clock, each step ending where the run's next one did "
            f"({len(self.ends):,} steps streamed; after them, the fitted model's)"
        )


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


def clock_figures(clock: RunClock | None, replicas: int, steps: int) -> dict:
    """whatif.json's account of the exact replay's clock: which it was, the steps the replay
    took beside those the run streamed, and the model's own step time against the run's (in
    `steps_words` too): far apart, the two were not in step, or the model's steps cost other
    than the server's. A run over several replicas had no clock of its own (`clock` None)."""
    if clock is None:
        words = f"the fitted model's step times ({replicas} replicas: the streams do not say "
        return {
            "clock": words + "which one stepped)",
            "steps_replayed": steps,
            "steps_streamed": None,
            "model_over_run_step": None,
            "steps_words": "",
        }
    ratio = clock.model_over_run()
    said = f"{steps:,} steps replayed, {len(clock.ends):,} streamed"
    if ratio is not None:
        said += (
            f"; the model's own step {ratio['p50']:.2f}x the run's "
            f"(5-95 %: {ratio['p5']:.2f}-{ratio['p95']:.2f}x)"
        )
    return {
        "clock": clock.words(),
        "steps_replayed": steps,
        "steps_streamed": len(clock.ends),
        "model_over_run_step": ratio,
        "steps_words": said,
    }
