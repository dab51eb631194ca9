"""A run's step times, read from its streams: what a step that ran a prefill took on the server.

A server's step ends with an output to every request it advanced, and those outputs reach their
open streams within a few milliseconds of each other. So where a request's first token arrives
while another stream is decoding, that stream's gap ending at the same instant is the step that
computed the prefill (vLLM schedules a prefill and the running decodes in one step): its length,
against the uncached tokens of every first token that arrived with it, prices a prefill with no
queueing in it. A request sent to an idle server (nothing else in flight until its first token)
gives a second kind of sample: its TTFT is its own prefill step.

A TTFT fit cannot give this where the pool is scarce: there a request's TTFT holds its wait for
pages, which grows with the very uncached tokens the fit prices, so the fit charged 6.8 ms a
token on a vLLM run at 110 pages whose steps took 4.3 (docs/measurements/whatif-vllm.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TOLERANCE = 0.01  # seconds: outputs of one step reach every stream within this
TOLERANCE_OF_STEP = 0.25  # ... and within this share of a decode step (a fast server's steps)


def step_samples(
    ok: pd.DataFrame, chunk: int, decode_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uncached tokens, attended pairs, seconds) of each step seen to run prefills whose first
    tokens it produced, the prefills' tokens summed; steps of more than `chunk` prefill tokens
    (a chunked prefill's last step holds part of them) are left out. `decode_s`: the run's
    decode step, which bounds how far apart one step's outputs may arrive."""
    tol = min(TOLERANCE, TOLERANCE_OF_STEP * decode_s)
    rows = ok[ok["cached_tokens"].notna() & ok["t_first_token"].notna()]
    first = rows["t_first_token"].to_numpy(dtype=float)
    n = (rows["prompt_tokens"] - rows["cached_tokens"]).to_numpy(dtype=float)
    cached = rows["cached_tokens"].to_numpy(dtype=float)
    pairs = n * cached + n * (n + 1) / 2
    gap = _gaps_ending_at(rows, first, tol)
    alone = _alone(rows, first)
    out: list[tuple[float, float, float]] = []
    for members in _steps(first, tol):
        seen = gap[members][~np.isnan(gap[members])]
        seconds = float(seen.min()) if len(seen) else float("nan")
        if np.isnan(seconds) and len(members) == 1 and alone[members[0]]:
            seconds = first[members[0]] - rows["t_sent"].to_numpy(dtype=float)[members[0]]
        tokens = float(n[members].sum())
        if not np.isnan(seconds) and 0 < tokens <= chunk:
            out.append((tokens, float(pairs[members].sum()), float(seconds)))
    arr = np.array(out, dtype=float).reshape(-1, 3)
    return arr[:, 0], arr[:, 1], arr[:, 2]


def decode_step(ok: pd.DataFrame) -> float | None:
    """The median gap between two tokens of a stream where the step ended no other request's
    prefill (no first token arrived with it): a step of decodes alone. None without gaps."""
    first = np.sort(ok["t_first_token"].dropna().to_numpy(dtype=float))
    gaps = []
    for times in ok["chunk_times"]:
        t = np.asarray(times, dtype=float)
        if len(t) < 2:
            continue
        k = np.clip(np.searchsorted(first, t[1:]), 1, max(len(first) - 1, 1))
        near = np.minimum(np.abs(first[k] - t[1:]), np.abs(first[k - 1] - t[1:]))
        gaps.append(np.diff(t)[near > TOLERANCE] if len(first) > 1 else np.diff(t))
    flat = np.concatenate(gaps) if gaps else np.empty(0)
    return float(np.median(flat)) if len(flat) else None


def _steps(first: np.ndarray, tol: float) -> list[np.ndarray]:
    """Requests whose first tokens arrived together (within `tol` of the previous one)."""
    order = np.argsort(first, kind="stable")
    cuts = np.flatnonzero(np.diff(first[order]) > tol) + 1
    return np.split(order, cuts)


def _gaps_ending_at(rows: pd.DataFrame, first: np.ndarray, tol: float) -> np.ndarray:
    """Per request, the gap of another stream that ends nearest its first token, within `tol`
    (NaN: no stream was decoding then)."""
    ends, starts, owner = [], [], []
    for i, times in enumerate(rows["chunk_times"]):
        t = np.asarray(times, dtype=float)
        ends.append(t[1:])
        starts.append(t[:-1])
        owner.append(np.full(max(len(t) - 1, 0), i))
    end, start, who = (np.concatenate(x) if x else np.empty(0) for x in (ends, starts, owner))
    order = np.argsort(end, kind="stable")
    end, start, who = end[order], start[order], who[order]
    lo = np.searchsorted(end, first - tol)
    hi = np.searchsorted(end, first + tol, side="right")
    out = np.full(len(first), np.nan)
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        keep = np.flatnonzero(who[a:b] != i) + a
        if len(keep):
            j = keep[np.argmin(np.abs(end[keep] - first[i]))]
            out[i] = float(end[j] - start[j])
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
