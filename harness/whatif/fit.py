"""The what-if's time model, fitted to the run itself.

The replay's engines step on a cost model of the simulated runner's form: a step costs `fixed`
plus `per_token` for every token it computes, `per_attended` for every (query, key) pair those
tokens attend (`n` uncached tokens over `cached` ones attend `n*cached + n(n+1)/2`; a decode one
token over its context) and `per_sample` for every request it advances, so a request queued
behind others waits for their steps, as it did on the server.

The four terms come from the run's own steps where its streams show them (`steps.py`: the token
arrivals of all streams grouped into the server's steps, each shaped and timed by a gap of one
of its streams; a request alone on the server gives its TTFT as its prefill step): non-negative
least squares, absolute error (a step's seconds are what the replay adds up). On a simulated run
this gives back the cost model that made it (a test). Only where the streams show fewer than
MIN_POINTS steps that ran a prefill (one request at a time, or no chunk times) is the fit made to
TTFTs instead, `ttft = a + b * n + c * pairs` (weighted by 1/ttft: relative error), a step then
costing the run's median gap between streamed tokens plus `b` and `c`. A TTFT holds the
request's wait for the server as well as its prefill, and where pages are scarce that wait grows
with `n`: such a fit over-prices a prefill and the replay, queueing again on top, runs far behind
the run (a vLLM run at 110 pages replayed at its own sends: TTFT p50 99 s against 6.4 s measured;
with its steps, 5.0 s; docs/measurements/whatif-vllm.md).

A real server's steps are not that regular: on a shared host one decode step takes a few per cent
more or less than the next with the same batch. Where pages are scarce, which blocks a request
finds depends on that order of events (who allocated last before it came), so one replay is one
draw among many (measured on vLLM, 2026-12-04: three runs of one trace at 150 pages gave 76.0,
76.7 and 81.2 % hit). `step_noise` reads that jitter from the run itself: the ratio of two
consecutive gaps of one stream, both decode-only steps (under 1.5x the median gap), whose log has
a standard deviation of sqrt(2) sigma when each step is the model's time x exp(sigma z); taken
robustly (the median absolute deviation), so the steps that did run a prefill weigh nothing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.engine.runners.cost_model import CostModel
from harness.errors import InputError
from harness.whatif.steps import step_shapes

MIN_POINTS = 8
_DECODE_ONLY = 1.5  # a gap under this x the median gap: a step that ran no prefill
_EXACT_BELOW = 1e-3  # a sigma under 0.1 %: exact steps, stamped to the microsecond


@dataclass(frozen=True)
class TtftFit:
    intercept_s: float  # a: a prefill alone's fixed cost (the TTFT fit's, or a step's)
    per_token_s: float  # b: seconds per token computed
    per_pair_s: float  # c: seconds per (query, key) pair those tokens attend
    decode_s: float  # a step's fixed cost (the TTFT fit: the median gap between tokens)
    points: int
    r2: float
    source: str = "ttft"  # "steps": the run's step times; "ttft": its TTFTs
    per_sample_s: float = 0.0  # seconds per request a step advances (the step fit)

    def ttft(self, prompt: np.ndarray, cached: np.ndarray) -> np.ndarray:
        n = prompt - cached
        return self.intercept_s + self.per_token_s * n + self.per_pair_s * pairs(n, cached)

    def scaled(self, k: float) -> TtftFit:
        """The same fit with its prefill terms (per token, per pair) times `k`."""
        return dataclasses.replace(
            self, per_token_s=self.per_token_s * k, per_pair_s=self.per_pair_s * k
        )

    def cost_model(self) -> CostModel:
        return CostModel(
            fixed_s=self.decode_s,
            per_token_s=self.per_token_s,
            per_attended_s=self.per_pair_s,
            per_sample_s=self.per_sample_s,
            meta={"device": f"fitted to the run's {self.source} (what-if)"},
        )

    def as_dict(self) -> dict:
        return {
            "intercept_s": self.intercept_s,
            "per_uncached_token_s": self.per_token_s,
            "per_attended_pair_s": self.per_pair_s,
            "decode_step_s": self.decode_s,
            "per_sample_s": self.per_sample_s,
            "points": self.points,
            "r2": self.r2,
            "source": self.source,
        }


def pairs(n: np.ndarray, cached: np.ndarray) -> np.ndarray:
    return n * cached + n * (n + 1) / 2


def fit_time(ok: pd.DataFrame) -> TtftFit:
    """The run's step times (module docstring): from its streams where they show MIN_POINTS
    steps that ran a prefill, else from its TTFTs."""
    shapes = step_shapes(ok)
    tokens, attended, samples, seconds = shapes.T
    if int((tokens > samples).sum()) < MIN_POINTS:
        return fit_ttft(ok)
    from scipy.optimize import nnls

    x = np.c_[np.ones_like(tokens), tokens, attended, samples]
    coef, _ = nnls(x, seconds)
    fixed, b, c, per_sample = map(float, coef)
    ss = float(((seconds - seconds.mean()) ** 2).sum())
    r2 = 1.0 - float(((seconds - x @ coef) ** 2).sum()) / ss if ss > 0 else 1.0
    return TtftFit(fixed + per_sample, b, c, fixed, len(shapes), r2, "steps", per_sample)


def fit_ttft(ok: pd.DataFrame) -> TtftFit:
    """Fit on measured, ok requests that report cached_tokens and had a first token."""
    from scipy.optimize import nnls

    rows = ok[ok["cached_tokens"].notna() & ok["t_first_token"].notna()]
    ttft = (rows["t_first_token"] - rows["t_sent"]).to_numpy(dtype=float)
    rows, ttft = rows[ttft > 0], ttft[ttft > 0]
    if len(rows) < MIN_POINTS:
        raise InputError(
            f"the run has {len(rows)} measured requests with TTFT and cached_tokens; "
            f"the what-if's TTFT fit needs {MIN_POINTS}"
        )
    cached = rows["cached_tokens"].to_numpy(dtype=float)
    n = rows["prompt_tokens"].to_numpy(dtype=float) - cached
    x = np.c_[np.ones_like(n), n, pairs(n, cached)]
    coef, _ = nnls(x / ttft[:, None], np.ones_like(ttft))
    pred = x @ coef
    ss = float(((ttft - ttft.mean()) ** 2).sum())
    r2 = 1.0 - float(((ttft - pred) ** 2).sum()) / ss if ss > 0 else 1.0
    a, b, c = map(float, coef)
    return TtftFit(a, b, c, _decode_gap(rows, a), len(rows), r2)


def _decode_gap(rows: pd.DataFrame, fallback: float) -> float:
    gaps = [np.diff(np.asarray(c, dtype=float)) for c in rows["chunk_times"] if len(c) > 1]
    gaps = [g for g in gaps if len(g)]
    return float(np.median(np.concatenate(gaps))) if gaps else fallback


def step_noise(ok: pd.DataFrame) -> float:
    """Sigma of a step's log time about the model's, from consecutive decode-only gaps (module
    docstring); 0.0 for a run too short to say, or whose steps were exact (a virtual clock)."""
    gaps = [np.diff(np.asarray(c, dtype=float)) for c in ok["chunk_times"] if len(c) > 2]
    if not gaps:
        return 0.0
    limit = _DECODE_ONLY * float(np.median(np.concatenate(gaps)))
    ratios = []
    for g in gaps:
        a, b = g[:-1], g[1:]
        keep = (a > 0) & (b > 0) & (a < limit) & (b < limit)
        ratios.append(np.log(b[keep] / a[keep]))
    logs = np.concatenate(ratios)
    if len(logs) < MIN_POINTS:
        return 0.0
    mad = float(np.median(np.abs(logs - np.median(logs))))
    sigma = 1.4826 * mad / math.sqrt(2)  # 1.4826 MAD: the sd of a normal
    return sigma if sigma >= _EXACT_BELOW else 0.0
