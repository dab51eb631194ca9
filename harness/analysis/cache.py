"""Prefix-cache analysis: the server's hit rate beside the ideal, and every missed token named.

Hit rate is `Σ cached_tokens / Σ prompt_tokens` over requests whose server reported
`cached_tokens`; the ideal is `Σ cached_tokens_ideal / Σ prompt_tokens` (an infinite cache on one
server, at the server's cache granularity: analysis.ideal, analysis.granularity) over the same
requests. A request's missed prompt tokens (prompt − cached) are split into (docs/metrics.md):

- cold: no earlier request had them (prompt − shared prefix);
- alignment: shared, but inside the server's partial last block (or the one token every prompt
  computes): shared prefix − ideal;
- in flight: an earlier request had them but was still prefilling (no first token yet) when this
  one was sent, as with parallel subagent forks: ideal − ideal over finished requests, as far as
  the server missed them;
- evicted/misrouted: an earlier, finished request had them and the server missed them.

A server that reported nothing has its ideal hits counted as `unreported` (cold and alignment do
not depend on the server). Without the run's trace only the recorded ideal is known: alignment
and in-flight cannot be told apart from cold and evicted, and the attribution says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.ideal.walk import block_hits
from harness.analysis.metrics import prompt_tokens

BREAKDOWNS = ("turn", "agent", "endpoint", "session_id")
CATEGORIES = ("cold", "alignment", "in_flight", "evicted")
MISS_COLUMNS = tuple(f"miss_{c}" for c in (*CATEGORIES, "unreported"))


def attribute_misses(ok: pd.DataFrame, block_size: int | None = None) -> pd.DataFrame:
    """Per request: prompt, cached, ideal, and its missed tokens by category (`miss_*`).

    `block_size`: the granularity the ideal was computed at (needed for the in-flight split);
    without the walk's columns (no trace) the split is the approximate one."""
    prompt = prompt_tokens(ok)
    cached = ok["cached_tokens"].to_numpy(dtype=float)
    reported = ~np.isnan(cached)
    ideal = np.minimum(np.nan_to_num(ok["cached_tokens_ideal"].to_numpy(dtype=float)), prompt)
    if "ideal_shared_tokens" in ok and block_size is not None:
        shared = np.minimum(ok["ideal_shared_tokens"].to_numpy(dtype=float), prompt)
        ready = np.minimum(
            block_hits(ok["ideal_ready_tokens"].to_numpy(dtype=float), prompt, block_size), ideal
        )
    else:  # approximate: alignment folds into cold, in flight into evicted
        shared, ready = ideal, ideal
    hit = np.where(reported, np.nan_to_num(cached), 0.0)
    split = _split(prompt, shared, ideal, ready, hit, reported)
    frame = pd.DataFrame(
        {
            "request_id": ok["request_id"].to_numpy(),
            "prompt": prompt,
            "cached": cached,
            "ideal": ok["cached_tokens_ideal"].to_numpy(dtype=float),
            "reported": reported,
            **split,
        },
        index=ok.index,
    )
    frame["miss_class"] = _classes(frame)
    return frame


def _split(prompt, shared, ideal, ready, hit, reported) -> dict[str, np.ndarray]:
    cold, alignment = prompt - shared, shared - ideal
    beyond = np.where(reported, np.maximum(hit - ideal, 0), 0)  # a hit the ideal did not expect:
    from_alignment = np.minimum(beyond, alignment)  # finer blocks first, then a cache warm before
    alignment, cold = alignment - from_alignment, np.maximum(cold - (beyond - from_alignment), 0)
    missed_ideal = np.where(reported, np.maximum(ideal - hit, 0), 0)
    evicted = np.where(reported, np.maximum(ready - hit, 0), 0)
    return {
        "miss_cold": cold,
        "miss_alignment": alignment,
        "miss_in_flight": missed_ideal - evicted,
        "miss_evicted": evicted,
        "miss_unreported": np.where(reported, 0, ideal),
        "beyond_ideal": beyond,
    }


def _classes(frame: pd.DataFrame) -> np.ndarray:
    """Each request's largest miss category; `hit` when it missed nothing."""
    misses = frame[[f"miss_{c}" for c in CATEGORIES]].to_numpy()
    largest = np.array(CATEGORIES, dtype=object)[misses.argmax(axis=1)]
    return np.select(
        [~frame["reported"].to_numpy(), misses.max(axis=1) <= 0],
        ["unreported", "hit"],
        default=largest,
    )


def hit_rates(misses: pd.DataFrame) -> dict:
    rep = misses[misses["reported"]]
    prompt = float(rep["prompt"].sum())
    all_prompt = float(misses["prompt"].sum())
    return {
        "cache_hit_rate": float(rep["cached"].sum()) / prompt if prompt > 0 else None,
        "ideal_cache_hit_rate": float(rep["ideal"].sum()) / prompt if prompt > 0 else None,
        "ideal_cache_hit_rate_all": float(np.nansum(misses["ideal"])) / all_prompt
        if all_prompt > 0
        else None,
        "requests": int(len(misses)),
        "requests_reported": int(len(rep)),
        "prompt_tokens": all_prompt,
        "miss_tokens": {c.removeprefix("miss_"): float(misses[c].sum()) for c in MISS_COLUMNS},
        "beyond_ideal_tokens": float(misses["beyond_ideal"].sum()),
        "requests_by_miss_class": {
            str(k): int(v) for k, v in misses["miss_class"].value_counts().sort_index().items()
        },
    }


def breakdown(
    ok: pd.DataFrame, misses: pd.DataFrame, key: str | pd.Series, failed: pd.Series | None = None
) -> pd.DataFrame:
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
        **{c: (c, "sum") for c in MISS_COLUMNS},
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        table["hit_rate"] = np.where(
            table["rep_prompt"] > 0, table["rep_cached"] / table["rep_prompt"], np.nan
        )
        table["ideal_hit_rate"] = np.where(
            table["rep_prompt"] > 0, table["rep_ideal"] / table["rep_prompt"], np.nan
        )
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
    how much finished prefix the server missed (evicted/misrouted) on those versus on requests that
    stayed."""
    if ok["endpoint"].nunique(dropna=True) < 2:
        return None
    sessions, _ = pd.factorize(ok["session_id"].to_numpy())
    endpoints, _ = pd.factorize(ok["endpoint"].to_numpy())  # a missing endpoint is -1
    order = np.lexsort(
        (ok["t_sent"].to_numpy(dtype=float), ok["turn"].to_numpy(dtype=float), sessions)
    )
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
            "evicted_tokens": float(m["miss_evicted"].sum()),
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
                "ideal_hit_rate": None
                if np.isnan(row["ideal_hit_rate"])
                else float(row["ideal_hit_rate"]),
            }
            for group, row in table.iterrows()
        }
    return out


def group_label(group) -> str:
    if isinstance(group, float) and group.is_integer():
        return str(int(group))
    return str(group)
