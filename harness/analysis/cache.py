"""Prefix-cache analysis: the server's hit rate beside the ideal, and every missed token named.

Hit rate is `Σ cached_tokens / Σ prompt_tokens` over requests whose server reported
`cached_tokens`; the ideal is `Σ cached_tokens_ideal / Σ prompt_tokens` (an infinite cache on one
server, at the server's cache granularity: analysis.ideal) over the same requests. Each prompt
token of a request sits at a position; the walk's boundaries (`analysis.ideal.rules.Bounds`) cut
the prompt into zones, and a token the server missed is named by its zone (docs/metrics.md):

- cold: no earlier request had it (at or after `shared`);
- server rule: granularity: shared, inside the partial last block (`whole`..`shared`);
- server rule: prompt−1 cap: the last block of a prompt shared whole (`ideal`..`whole`);
- in flight: shared only with requests that had not computed it when this one was sent;
- misrouted: computed on another endpoint only;
- server rule: last block: computed on this endpoint, in the last block of a whole-block prompt,
  where the records show the server never keeps those;
- evicted: computed on this endpoint by an earlier request that finished prefill, not excluded
  by a rule the records show: the server had it and lost it;
- ineligible, expired: a hosted API's rules (`analysis.hosted_cache`): an ideal hit below its
  minimum cacheable length; a prefix idle past its TTL;
- unexplained: what no rule or evidence explains (a rule with too few cases, or contradicted; no
  matching trace). Never counted as evicted.

A server that reported nothing has its ideal hits counted as `unreported`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.ideal import rules
from harness.analysis.ideal.server_tokens import WALK_COLUMNS
from harness.analysis.ideal.walk import block_hits
from harness.analysis.metrics import prompt_tokens

BREAKDOWNS = ("turn", "agent", "endpoint", "session_id")
CATEGORIES = (
    "cold",
    "granularity",
    "prompt_cap",
    "in_flight",
    "misrouted",
    "last_block",
    "no_hits",
    "ineligible",
    "expired",
    "evicted",
    "unexplained",
)
MISS_COLUMNS = tuple(f"miss_{c}" for c in (*CATEGORIES, "unreported"))
ZONES = ("kept", "last", "elsewhere", "flight", "coarse", "cap", "part", "cold")  # between Bounds
ABOVE_IDEAL = 5  # ZONES from here on do not depend on what the server kept


def attribute_misses(
    ok: pd.DataFrame,
    block_size: int | None = None,
    granularity: dict | None = None,
    known: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Per request: prompt, cached, ideal, its missed tokens by category (`miss_*`) and its
    server-rule cases (`case_*`: 1 fits, -1 against, 0 none; analysis.ideal.rules).

    `block_size`: the granularity the ideal was computed at (`granularity`: how it was chosen);
    without the walk's columns (no trace) only the ideal is known, and its misses are unexplained.
    `known`: the rules the server's source states (`rules.known_rules`)."""
    prompt = prompt_tokens(ok)
    cached = ok["cached_tokens"].to_numpy(dtype=float)
    reported = ~np.isnan(cached)
    hit = np.where(reported, np.nan_to_num(cached), 0.0)
    exact = all(c in ok for c in WALK_COLUMNS) and block_size is not None
    b = _bounds(ok, prompt, block_size if exact else None, _server_block(block_size, granularity))
    case = rules.cases(b, hit, reported)
    status = rules.statuses(case, granularity, known)
    frame = pd.DataFrame(
        {
            "request_id": ok["request_id"].to_numpy(),
            "prompt": prompt,
            "cached": cached,
            "ideal": ok["cached_tokens_ideal"].to_numpy(dtype=float),
            "reported": reported,
            **_split(b, hit, reported, _names(status, exact)),
            **{f"case_{k}": v for k, v in case.items()},
        },
        index=ok.index,
    )
    frame["miss_class"] = miss_classes(frame)
    return frame


def _server_block(block: int | None, granularity: dict | None) -> int | None:
    """The records' block where it is a coarser multiple of the ideal's (`--block-size` finer
    than the server's): the hits between the two are the server's granularity, not lost."""
    seen = (granularity or {}).get("from_records")
    if block and seen and seen > block and seen % block == 0:
        return seen
    return block


def _bounds(
    ok: pd.DataFrame, prompt: np.ndarray, block: int | None, server_block: int | None
) -> rules.Bounds:
    ideal = np.minimum(np.nan_to_num(ok["cached_tokens_ideal"].to_numpy(dtype=float)), prompt)
    if block is None or server_block is None:  # no walk: every bound below prompt is the ideal
        return rules.Bounds(np.vstack([np.zeros_like(ideal), *[ideal] * 7, prompt]))
    col = {c: np.minimum(ok[c].to_numpy(dtype=float), prompt) for c in WALK_COLUMNS}
    shared = col["ideal_shared_tokens"]
    ideal = np.minimum(ideal, shared)
    served = np.minimum(block_hits(shared, prompt, server_block), ideal)
    ready = np.minimum(block_hits(col["ideal_ready_tokens"], prompt, block), served)
    held = np.minimum(block_hits(col["ideal_held_tokens"], prompt, block), ready)
    kept = np.minimum(block_hits(col["ideal_kept_tokens"], prompt, block), held)
    whole = np.clip(np.floor_divide(shared, block) * block, ideal, shared)
    at = np.vstack([np.zeros_like(ideal), kept, held, ready, served, ideal, whole, shared, prompt])
    return rules.Bounds(np.nan_to_num(at))


def _names(status: dict[str, dict], exact: bool) -> tuple[str, ...]:
    """The category each zone's missed tokens count as, given what the records show."""
    if rules.explains(status, "no_hits"):
        held = ("no_hits", "no_hits")
    else:
        evicted = "evicted" if exact else "unexplained"
        last = status["last_block"]["status"]
        named = {"detected": "last_block", "known": "last_block", "contradicted": evicted}
        held = (evicted, named.get(last, "unexplained"))
    return (
        *held,
        "misrouted",
        "in_flight",
        "granularity",  # the records' coarser block: they show it
        "prompt_cap" if rules.explains(status, "prompt_cap") else "unexplained",
        "granularity" if rules.explains(status, "granularity") else "unexplained",
        "cold",
    )


def _split(b: rules.Bounds, hit, reported, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Each zone's missed tokens into its category; an unreported request's ideal hit stays
    `unreported` (the zones above the ideal do not depend on the server)."""
    out = {c: np.zeros(len(hit)) for c in MISS_COLUMNS}
    for z, name in enumerate(names):
        lo, hi = b.at[z], b.at[z + 1]
        unreported = hi - lo if z >= ABOVE_IDEAL else 0.0
        out[f"miss_{name}"] += np.where(
            reported, np.maximum(hi - np.maximum(lo, hit), 0), unreported
        )
    out["miss_unreported"] = np.where(reported, 0.0, b.ideal)
    out["beyond_ideal"] = np.where(reported, np.maximum(hit - b.ideal, 0), 0)
    return out


def miss_classes(frame: pd.DataFrame) -> np.ndarray:
    """Each request's largest miss category; `hit` when it missed nothing."""
    misses = frame[[f"miss_{c}" for c in CATEGORIES]].to_numpy()
    largest = np.array(CATEGORIES, dtype=object)[misses.argmax(axis=1)]
    return np.select(
        [~frame["reported"].to_numpy(), misses.max(axis=1) <= 0],
        ["unreported", "hit"],
        default=largest,
    )


def server_rules(
    misses: pd.DataFrame,
    granularity: dict | None,
    block_size: int | None,
    known: dict[str, str] | None = None,
) -> dict:
    """summary.json `cache.server_rules`: each rule, its status, cases and the tokens it names
    (and, where the server's source states it, where: `known`)."""
    case = {k: misses[f"case_{k}"].to_numpy() for k in rules.RULES if f"case_{k}" in misses}
    status = rules.statuses(case, granularity, known)
    return {
        name: {
            "rule": rules.rule_text(name, block_size),
            **status[name],
            "missed_tokens": float(misses[f"miss_{name}"].sum()),
        }
        for name in rules.RULES
    }


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
        **miss_shares(misses, all_prompt),
        "beyond_ideal_tokens": float(misses["beyond_ideal"].sum()),
        "requests_by_miss_class": {
            str(k): int(v) for k, v in misses["miss_class"].value_counts().sort_index().items()
        },
    }


def miss_shares(misses: pd.DataFrame, prompt: float) -> dict:
    """The missed tokens by category, and each as a share of the prompt tokens and of the
    missed tokens (every share says its base in its key)."""
    tokens = {c.removeprefix("miss_"): float(misses[c].sum()) for c in MISS_COLUMNS}
    missed = sum(tokens.values())
    return {
        "miss_tokens": tokens,
        "missed_tokens": missed,
        "miss_share_of_prompt_tokens": {
            k: v / prompt if prompt else None for k, v in tokens.items()
        },
        "miss_share_of_missed_tokens": {
            k: v / missed if missed else None for k, v in tokens.items()
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
    the prefix the server missed on those (misrouted: computed on another endpoint only; evicted:
    computed on its own) versus on requests that stayed."""
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
            "misrouted_tokens": float(m["miss_misrouted"].sum()),
            "evicted_tokens": float(m["miss_evicted"].sum()),
            "unexplained_tokens": float(m["miss_unexplained"].sum()),
            "cache_hit_rate": float(rep["cached"].sum()) / prompt if prompt > 0 else None,
            "ideal_cache_hit_rate": float(rep["ideal"].sum()) / prompt if prompt > 0 else None,
        }
    return out


GROUPINGS = ("agent", "endpoint", "turn", "time")  # the report's tables, in its order


def group_tables(
    measured: pd.DataFrame, ok: pd.DataFrame, misses: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """Hit rate vs ideal by agent, endpoint, turn index and time bin (`breakdown`), each with
    the measured window's failed requests counted per group: computed once, read by the
    summary (`breakdowns`) and by the report's figures and tables."""
    out = {}
    for key in GROUPINGS:
        groups = time_bins(measured) if key == "time" else measured[key]
        failed = groups[(measured["status"] != "ok").to_numpy()].value_counts(dropna=False)
        out[key] = breakdown(ok, misses, groups.loc[ok.index], failed=failed)
    return out


def breakdowns(tables: dict[str, pd.DataFrame]) -> dict:
    """summary.json's `cache.by_agent`, `by_endpoint`, `by_turn` (of `group_tables`): small,
    stable tables."""
    out = {}
    for key in ("agent", "endpoint", "turn"):
        table = tables[key]
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
