"""A run's steps, read from its streams: when each of the server's steps ended, what it computed,
and how long it took.

A server's step ends with an output to every request it advanced, and those outputs reach their
open streams within a few milliseconds of each other. So the token arrivals of all streams,
grouped where they come together (within `TOLERANCE`, or a quarter of a step on a fast server),
are the run's steps: each holds a first token for every prefill it finished (its request's
uncached tokens, attending `n * cached + n(n+1)/2` pairs) and a token for every decode (one
token attending its context), and where one of its streams had a token before, that gap is the
step's length. A request sent to an idle server (nothing else in flight until its first token)
gives one more: its TTFT is its prefill step. These are the shapes the simulated runner prices
(`engine/runners/cost_model.py`: tokens, attended pairs, samples), so the cost model is fitted to
the steps themselves, with no queueing in them.

A TTFT fit cannot do this where the pool is scarce: there a request's TTFT holds its wait for
pages, which grows with the very uncached tokens the fit prices, so the fit charged 6.8 ms a
token on a vLLM run at 110 pages whose steps took 4.3 (docs/measurements/whatif-vllm.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TOLERANCE = 0.01  # seconds: outputs of one step reach every stream within this
TOLERANCE_OF_STEP = 0.25  # ... and within this share of a step (a fast server's steps)


def step_shapes(ok: pd.DataFrame) -> np.ndarray:
    """One row per step seen: (tokens, attended pairs, samples, seconds)."""
    rows = ok[ok["cached_tokens"].notna() & ok["t_first_token"].notna()]
    times = [np.asarray(c, dtype=float) for c in rows["chunk_times"]]
    if not any(len(t) for t in times):
        return np.empty((0, 4))
    when = np.concatenate(times)
    req = np.concatenate([np.full(len(t), i) for i, t in enumerate(times)])
    nth = np.concatenate([np.arange(len(t)) for t in times])
    order = np.argsort(when, kind="stable")
    when, req, nth = when[order], req[order], nth[order]
    prompt = rows["prompt_tokens"].to_numpy(dtype=float)
    cached = rows["cached_tokens"].to_numpy(dtype=float)
    n = prompt - cached
    steps = _steps(when, req, nth, prompt, cached, _tolerance(times))
    alone = _alone(rows, rows["t_first_token"].to_numpy(dtype=float))
    ttft = (rows["t_first_token"] - rows["t_sent"]).to_numpy(dtype=float)
    lone = [
        (n[i], n[i] * cached[i] + n[i] * (n[i] + 1) / 2, 1.0, ttft[i])
        for i in np.flatnonzero(alone)
    ]
    return np.array(steps + lone, dtype=float).reshape(-1, 4)


def step_ends(ok: pd.DataFrame) -> np.ndarray:
    """When each of the run's steps seen ended (its outputs' first arrival), in time order:
    every step that streamed a token, timed by a gap or not."""
    times = [np.asarray(c, dtype=float) for c in ok["chunk_times"]]
    if not any(len(t) for t in times):
        return np.empty(0)
    when = np.sort(np.concatenate(times))
    return when[np.r_[0, np.flatnonzero(np.diff(when) > _tolerance(times)) + 1]]


def _tolerance(times: list[np.ndarray]) -> float:
    gaps = [np.diff(t) for t in times if len(t) > 1]
    step = float(np.median(np.concatenate(gaps))) if gaps else TOLERANCE / TOLERANCE_OF_STEP
    return min(TOLERANCE, TOLERANCE_OF_STEP * step)


def _steps(when, req, nth, prompt, cached, tol: float) -> list[tuple[float, ...]]:
    """The arrivals grouped into steps; those with a gap to time them, shaped."""
    out: list[tuple[float, ...]] = []
    last: dict[int, float] = {}
    for members in np.split(np.arange(len(when)), np.flatnonzero(np.diff(when) > tol) + 1):
        tokens = attended = 0.0
        gaps = []
        for j in members.tolist():
            r, k = int(req[j]), int(nth[j])
            if k == 0:  # a first token: the request's prefill ended here
                n = prompt[r] - cached[r]
                tokens, attended = tokens + n, attended + n * cached[r] + n * (n + 1) / 2
            else:  # a decode, over the prompt and the tokens before it
                tokens, attended = tokens + 1, attended + prompt[r] + k
                gaps.append(when[j] - last[r])
            last[r] = when[j]
        if gaps:
            out.append((tokens, attended, float(len(members)), min(gaps)))
    return out


def _alone(rows: pd.DataFrame, first: np.ndarray) -> np.ndarray:
    """Per request, whether nothing else was in flight from its send to its first token."""
    sent = rows["t_sent"].to_numpy(dtype=float)
    done = rows["t_done"].to_numpy(dtype=float)
    done = np.where(np.isnan(done), rows["t_last_token"].to_numpy(dtype=float), done)
    order = np.argsort(sent, kind="stable")
    out = np.zeros(len(sent), dtype=bool)
    for i in range(len(sent)):
        # another request overlaps [sent_i, first_i]: sent before first_i and not done by sent_i
        before = order[: np.searchsorted(sent[order], first[i], side="left")]
        others = before[before != i]
        out[i] = not bool((done[others] > sent[i]).any())
    return out
