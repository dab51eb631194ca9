"""Prefix-cache analysis: the server's hit rate beside the trace's ideal, and where misses came from.

Hit rate is `Σ cached_tokens / Σ prompt_tokens` over requests whose server reported
`cached_tokens`; the ideal is `Σ cached_tokens_ideal / Σ prompt_tokens_expected` (an infinite
cache on one server, from the trace) over the same requests. Each request's missed prompt tokens
are split into *cold* (no earlier prompt had them, so no cache could hit), *lost* (the ideal hit
them and the server did not: eviction or routing) and *unknown* (the server reported nothing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.metrics import prompt_tokens

BREAKDOWNS = ("turn", "agent", "endpoint", "session_id")


def attribute_misses(ok: pd.DataFrame) -> pd.DataFrame:
    """Per request: prompt, cached, ideal, and missed tokens split into cold / lost / unknown."""
    prompt = prompt_tokens(ok)
    cached = ok["cached_tokens"].to_numpy(dtype=float)
    ideal = np.minimum(ok["cached_tokens_ideal"].to_numpy(dtype=float), prompt)
    reported = ~np.isnan(cached)
    ideal0 = np.nan_to_num(ideal)
    lost = np.where(reported, np.maximum(ideal0 - np.nan_to_num(cached), 0), 0)
    hit = np.where(reported, np.maximum(np.nan_to_num(cached), ideal0), ideal0)
    cold = np.maximum(prompt - hit, 0)  # never seen before (or a partial last block)
    unknown = np.where(reported, 0, ideal0)  # ideal hits the server may or may not have served
    frame = pd.DataFrame(
        {
            "request_id": ok["request_id"].to_numpy(),
            "prompt": prompt,
            "cached": cached,
            "ideal": ideal,
            "reported": reported,
            "miss_cold": cold,
            "miss_lost": lost,
            "miss_unknown": unknown,
        },
        index=ok.index,
    )
    frame["miss_class"] = np.select(
        [~reported, lost > 0, cold > 0], ["unknown", "lost", "cold"], default="hit"
    )
    return frame


def hit_rates(misses: pd.DataFrame) -> dict:
    rep = misses[misses["reported"]]
    prompt = float(rep["prompt"].sum())
    all_prompt = float(misses["prompt"].sum())
    return {
        "cache_hit_rate": float(rep["cached"].sum()) / prompt if prompt > 0 else None,
        "ideal_cache_hit_rate": float(rep["ideal"].sum()) / prompt if prompt > 0 else None,
        "ideal_cache_hit_rate_all": float(np.nansum(misses["ideal"])) / all_prompt if all_prompt > 0 else None,
        "requests": int(len(misses)),
        "requests_reported": int(len(rep)),
        "prompt_tokens": all_prompt,
        "miss_tokens": {k: float(misses[f"miss_{k}"].sum()) for k in ("cold", "lost", "unknown")},
        "requests_by_miss_class": {str(k): int(v) for k, v in misses["miss_class"].value_counts().items()},
    }


def breakdown(ok: pd.DataFrame, misses: pd.DataFrame, key: str | pd.Series, failed: pd.Series | None = None) -> pd.DataFrame:
    """Hit rate vs ideal grouped by a record column (or a Series aligned to `ok`)."""
    groups = ok[key] if isinstance(key, str) else key
    frame = misses.assign(
        group=groups.to_numpy(),
        rep_prompt=np.where(misses["reported"], misses["prompt"], 0.0),
        rep_cached=np.where(misses["reported"], misses["cached"], 0.0),
        rep_ideal=np.where(misses["reported"], misses["ideal"], 0.0),
    )
    g = frame.groupby("group", dropna=False, sort=True)
    table = g.agg(
        requests=("prompt", "size"),
        reported=("reported", "sum"),
        prompt_tokens=("prompt", "sum"),
        rep_prompt=("rep_prompt", "sum"),
        rep_cached=("rep_cached", "sum"),
        rep_ideal=("rep_ideal", "sum"),
        miss_cold=("miss_cold", "sum"),
        miss_lost=("miss_lost", "sum"),
        miss_unknown=("miss_unknown", "sum"),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        table["hit_rate"] = np.where(table["rep_prompt"] > 0, table["rep_cached"] / table["rep_prompt"], np.nan)
        table["ideal_hit_rate"] = np.where(table["rep_prompt"] > 0, table["rep_ideal"] / table["rep_prompt"], np.nan)
    if failed is not None:
        table["failed"] = failed.reindex(table.index, fill_value=0).astype(int)
    return table.drop(columns=["rep_prompt", "rep_cached", "rep_ideal"])


def time_bins(records: pd.DataFrame, bins: int = 20) -> pd.Series:
    """Start of the time bin (s from the first send) each request was sent in; NaN if never sent."""
    t = records["t_sent"].to_numpy(dtype=float)
    if not np.isfinite(t).any():
        return pd.Series(np.nan, index=records.index)
    start = np.nanmin(t)
    width = max(np.nanmax(t) - start, 1e-9) / bins
    idx = np.minimum(np.floor((t - start) / width), bins - 1)
    return pd.Series(np.round(idx * width, 6), index=records.index)


def session_moves(ok: pd.DataFrame, misses: pd.DataFrame) -> dict | None:
    """With several endpoints: requests whose session's previous request went elsewhere, and
    how much ideal-hit prefix the server lost on those versus on requests that stayed."""
    if ok["endpoint"].nunique(dropna=True) < 2:
        return None
    sessions, _ = pd.factorize(ok["session_id"].to_numpy())
    endpoints, _ = pd.factorize(ok["endpoint"].to_numpy())  # a missing endpoint is -1
    order = np.lexsort((ok["t_sent"].to_numpy(dtype=float), ok["turn"].to_numpy(dtype=float), sessions))
    s, e = sessions[order], endpoints[order]
    has_prev = np.r_[False, s[1:] == s[:-1]]
    moved_sorted = has_prev & np.r_[False, e[1:] != e[:-1]]
    moved, first = np.empty_like(moved_sorted), np.empty_like(has_prev)
    moved[order], first[order] = moved_sorted, ~has_prev
    out = {}
    for label, mask in (("moved", moved), ("stayed", ~moved & ~first)):
        m = misses[mask]
        rep = m[m["reported"]]
        prompt = float(rep["prompt"].sum())
        out[label] = {
            "requests": int(len(m)),
            "lost_tokens": float(m["miss_lost"].sum()),
            "cache_hit_rate": float(rep["cached"].sum()) / prompt if prompt > 0 else None,
            "ideal_cache_hit_rate": float(rep["ideal"].sum()) / prompt if prompt > 0 else None,
        }
    return out


def breakdowns(ok: pd.DataFrame, misses: pd.DataFrame) -> dict:
    """summary.json's `cache.by_agent`, `by_endpoint`, `by_turn`: small, stable tables."""
    out = {}
    for key in ("agent", "endpoint", "turn"):
        table = breakdown(ok, misses, key)
        out[f"by_{key}"] = {
            group_label(group): {
                "requests": int(row["requests"]),
                "reported": int(row["reported"]),
                "hit_rate": None if np.isnan(row["hit_rate"]) else float(row["hit_rate"]),
                "ideal_hit_rate": None if np.isnan(row["ideal_hit_rate"]) else float(row["ideal_hit_rate"]),
            }
            for group, row in table.iterrows()
        }
    return out


def group_label(group) -> str:
    if isinstance(group, float) and group.is_integer():
        return str(int(group))
    return str(group)
