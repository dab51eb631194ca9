"""Latency and throughput metrics, exactly as docs/architecture.md's metric table defines them.

Inputs are the `ok` records of a run (`phase == "measure"`, `status == "ok"`); docs/metrics.md
states every definition and how peer tools differ. Percentiles are numpy's default (linear
interpolation) over the full data, so anyone can reproduce them from records.jsonl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from harness.analysis import chunks
from harness.analysis.summary_types import Percentiles
from harness.errors import RunFolderError

PERCENTILES = (50, 90, 95, 99)


def percentiles(values: np.ndarray | pd.Series) -> Percentiles:
    """`{p50, p90, p95, p99, mean, max, count}` of the finite values (nulls when there are none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    out: dict = {f"p{q}": None for q in PERCENTILES}
    out.update(mean=None, max=None, count=int(v.size))
    if v.size:
        for q, value in zip(PERCENTILES, np.percentile(v, PERCENTILES), strict=True):
            out[f"p{q}"] = float(value)
        out.update(mean=float(v.mean()), max=float(v.max()))
    return cast(Percentiles, out)


def weighted_percentiles(values: np.ndarray, weights: np.ndarray) -> Percentiles:
    """`percentiles(np.repeat(values, weights))` without building the repeated array: the
    token-weighted ITL of a million requests is tens of millions of samples."""
    v, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=np.int64)
    keep = np.isfinite(v) & (w > 0)
    v, w = v[keep], w[keep]
    n = int(w.sum())
    out: dict = {f"p{q}": None for q in PERCENTILES}
    out.update(mean=None, max=None, count=n)
    if not n:
        return cast(Percentiles, out)
    order = np.argsort(v, kind="stable")
    v, ends = v[order], np.cumsum(w[order])  # expanded positions [ends - w, ends) hold v
    for q in PERCENTILES:
        rank = (n - 1) * q / 100  # numpy's linear method on the expanded array
        lo, frac = int(np.floor(rank)), rank - np.floor(rank)
        below = v[np.searchsorted(ends, lo, side="right")]
        above = v[np.searchsorted(ends, min(lo + 1, n - 1), side="right")]
        out[f"p{q}"] = float(below + (above - below) * frac)
    out.update(mean=float((v * w[order]).sum() / n), max=float(v[-1]))
    return cast(Percentiles, out)


def completion_tokens(ok: pd.DataFrame) -> np.ndarray:
    """Server-reported completion tokens; the streamed chunk counts when the server said nothing."""
    reported = ok["completion_tokens"].to_numpy(dtype=float)
    missing = np.isnan(reported)
    if missing.any():
        counted = chunks.flat(ok["chunk_tokens"][missing])
        reported = reported.copy()
        reported[missing] = np.where(counted.lengths > 0, counted.sums(), np.nan)
    return reported


def prompt_tokens(ok: pd.DataFrame) -> np.ndarray:
    """Server-reported prompt tokens; the trace's expected count when the server said nothing."""
    reported = ok["prompt_tokens"].to_numpy(dtype=float)
    return np.where(
        np.isnan(reported), ok["prompt_tokens_expected"].to_numpy(dtype=float), reported
    )


def request_metrics(ok: pd.DataFrame, itl: InterTokenLatency | None = None) -> pd.DataFrame:
    """One row per request: ttft, tpot, e2el, interactivity, e2el_per_token, itl (its mean)."""
    itl = itl if itl is not None else itl_of(ok)
    t_sent = ok["t_sent"].to_numpy(dtype=float)
    t_first = ok["t_first_token"].to_numpy(dtype=float)
    t_last = ok["t_last_token"].to_numpy(dtype=float)
    e2el = ok["t_done"].to_numpy(dtype=float) - t_sent
    tokens = completion_tokens(ok)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(tokens >= 2, (t_last - t_first) / (tokens - 1), np.nan)
        interactivity = np.where(tpot > 0, 1.0 / tpot, np.nan)
        e2el_per_token = np.where(tokens >= 1, e2el / tokens, np.nan)
    return pd.DataFrame(
        {
            "request_id": ok["request_id"].to_numpy(),
            "ttft": t_first - t_sent,
            "tpot": tpot,
            "itl": itl.per_request,
            "e2el": e2el,
            "interactivity": interactivity,
            "e2el_per_token": e2el_per_token,
            "completion_tokens": tokens,
        },
        index=ok.index,
    )


@dataclass(frozen=True)
class InterTokenLatency:
    values: np.ndarray  # per chunk after a request's first: gap / tokens in that chunk
    weights: np.ndarray  # tokens in that chunk: each token counts once
    per_request: np.ndarray  # Σ gaps / Σ tokens after the first chunk, NaN with < 2 chunks
    owner: np.ndarray  # per value: the position of its request among the ok records

    def samples(self) -> np.ndarray:
        """One value per token: the token-weighted distribution numpy percentiles run on."""
        return np.repeat(self.values, self.weights.astype(np.int64))


def itl_of(ok: pd.DataFrame) -> InterTokenLatency:
    times_col = chunks.flat(ok["chunk_times"])
    lengths, times = times_col.lengths, times_col.values
    tokens = _chunk_tokens(chunks.flat(ok["chunk_tokens"]), lengths, ok)
    owner = times_col.owner()
    keep = tokens > 0  # a chunk without output tokens carries no inter-token gap
    times, tokens, owner = times[keep], tokens[keep], owner[keep]
    later = np.zeros(times.size, dtype=bool)
    later[1:] = owner[1:] == owner[:-1]
    gaps = np.zeros(times.size)
    gaps[1:] = np.diff(times)
    values = gaps[later] / tokens[later]
    n = len(lengths)
    gap_sum = np.bincount(owner[later], weights=gaps[later], minlength=n)
    token_sum = np.bincount(owner[later], weights=tokens[later], minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_request = np.where(token_sum > 0, gap_sum / token_sum, np.nan)
    return InterTokenLatency(values, tokens[later], per_request, owner[later])


def _chunk_tokens(tokens: chunks.FlatLists, lengths: np.ndarray, ok: pd.DataFrame) -> np.ndarray:
    """Tokens per chunk, aligned with the chunk times; one per chunk where a row has no counts."""
    absent = tokens.lengths == 0
    bad = ~absent & (tokens.lengths != lengths)
    if bad.any():
        line = int(ok["line"].to_numpy()[bad.argmax()])
        raise RunFolderError(
            "has a different length than chunk_times",
            path=ok.attrs.get("path"),
            line=line,
            field="chunk_tokens",
        )
    if not (absent.any() and lengths[absent].any()):
        return tokens.values
    # The server gave no counts for some rows: each of their chunks counts one token.
    filled = np.ones(int(lengths.sum()))
    filled[~np.repeat(absent, lengths)] = tokens.values
    return filled


def run_window(ok: pd.DataFrame) -> tuple[float, float]:
    """(min t_sent, max t_done) of the measured ok requests: the span every rate divides by."""
    if ok.empty:
        return (0.0, 0.0)
    return (float(ok["t_sent"].min()), float(ok["t_done"].max()))


def tpgs(ok: pd.DataFrame, n_gpus: float) -> dict:
    """Tokens per GPU-second, with its cached / uncached-input / output parts."""
    start, end = run_window(ok)
    denom = n_gpus * (end - start)
    prompt = np.nansum(prompt_tokens(ok))
    cached = np.nansum(ok["cached_tokens"].to_numpy(dtype=float))  # unreported counts as uncached
    output = np.nansum(completion_tokens(ok))
    if denom <= 0:
        return {"tpgs": None, "cached": None, "uncached_input": None, "output": None}
    return {
        "tpgs": float((prompt + output) / denom),
        "cached": float(cached / denom),
        "uncached_input": float((prompt - cached) / denom),
        "output": float(output / denom),
    }


def throughput(ok: pd.DataFrame) -> dict:
    start, end = run_window(ok)
    duration = end - start
    prompt = float(np.nansum(prompt_tokens(ok)))
    output = float(np.nansum(completion_tokens(ok)))

    def rate(x: float) -> float | None:
        return x / duration if duration > 0 else None

    return {
        "duration_s": duration,
        "requests_per_s": rate(len(ok)),
        "input_tokens_per_s": rate(prompt),
        "output_tokens_per_s": rate(output),
        "total_tokens_per_s": rate(prompt + output),
    }


def p90_inverse(values: np.ndarray) -> float | None:
    """`1 / p90(values)`: P90 interactivity from TPOT, E2E-normalized from E2EL per token."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return None
    p90 = float(np.percentile(v, 90))
    return 1.0 / p90 if p90 > 0 else None


def error_counts(measured: pd.DataFrame) -> dict[str, int]:
    """Failed measured requests (error, timeout) by error class (the status when no class)."""
    failed = measured[measured["status"].isin(("error", "timeout"))]  # cancelled: the run's stop
    labels = failed["error_class"].where(failed["error_class"].notna(), failed["status"])
    return {str(k): int(v) for k, v in labels.value_counts().sort_index().items()}
