"""Cache hits by the tier their KV came from: device, CPU memory, disk, a store shared by replicas.

Per request, from the records' `cached_tokens_<tier>` (the reference engine's usage, SGLang's
`cached_tokens_details`): over the requests that report a split, each tier's tokens, its hit rate
(`Σ tier tokens / Σ prompt_tokens`, so the tiers add up to the hit rate of those requests) and
its share of the cached tokens. Server-side, from the /metrics counters scraped before and after
the run (`cached_by_source` in the manifest's `server_metrics`: vLLM's
`vllm:prompt_tokens_cached_by_source`, the reference engine's own): each tier's Δ tokens.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.metrics import prompt_tokens

TIERS = ("device", "cpu", "disk", "remote")
COLUMNS = tuple(f"cached_tokens_{t}" for t in TIERS)


def tier_split(ok: pd.DataFrame, manifest: dict) -> dict | None:
    """summary.json's `cache.tiers`; None when neither the records nor /metrics split hits."""
    records = _from_records(ok)
    server = _from_server(manifest)
    if records is None and server is None:
        return None
    return {**(records or {"requests_reporting": 0}), "server": server}


def _from_records(ok: pd.DataFrame) -> dict | None:
    if not set(COLUMNS) <= set(ok.columns):
        return None
    split = ok[list(COLUMNS)].to_numpy(dtype=float)
    has = ~np.isnan(split).all(axis=1)
    if not has.any():
        return None
    tokens = np.nansum(split[has], axis=0)
    prompt = float(np.sum(prompt_tokens(ok)[has]))
    cached = float(tokens.sum())
    return {
        "requests_reporting": int(has.sum()),
        "tokens": {t: int(n) for t, n in zip(TIERS, tokens, strict=True)},
        "hit_rate": {
            t: (n / prompt if prompt else None) for t, n in zip(TIERS, tokens, strict=True)
        },
        "share": {t: (n / cached if cached else None) for t, n in zip(TIERS, tokens, strict=True)},
    }


def _from_server(manifest: dict) -> dict | None:
    scraped = manifest.get("server_metrics") or {}
    pairs = [
        (b["cached_by_source"], a["cached_by_source"])
        for b, a in zip(scraped.get("before") or [], scraped.get("after") or [], strict=False)
        if b and a and b.get("cached_by_source") and a.get("cached_by_source")
    ]
    if not pairs:
        return None
    delta = {t: sum(a.get(t, 0) - b.get(t, 0) for b, a in pairs) for t in TIERS}
    total = sum(delta.values())
    return {
        "tokens": delta,
        "share": {t: (n / total if total else None) for t, n in delta.items()},
        "endpoints_scraped": len(pairs),
    }
