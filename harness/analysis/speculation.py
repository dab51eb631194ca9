"""Speculative decoding over the run: how many drafted tokens the server accepted, from its
/metrics scraped before and after (manifest `server_metrics`, harness/prometheus.py).

vLLM counts drafts (one verify step of one request), drafted tokens, accepted tokens and accepted
tokens by draft position; the figures are its own (vLLM's spec-decode logging):

- acceptance rate = Δaccepted / Δdrafted tokens (draft tokens only; the bonus token excluded),
- mean accepted length = 1 + Δaccepted / Δdrafts (tokens a verify step emits, the bonus included),
- acceptance by position i = Δaccepted at position i / Δdrafts.

SGLang exports gauges, its scheduler's figures over the last logged batch rather than counters:
they are reported as read after the run, marked so, never differenced.

Per request, from the records' `spec_drafts`, `spec_draft_tokens`, `spec_accepted_tokens` (vLLM's
per-request `metrics.speculative_decoding`): the same rate over the measured requests that report
it, and the distribution of each request's own acceptance, which the counters cannot give (they
weight long replies more). docs/metrics.md, "Speculative decoding".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.metrics import percentiles

KEYS = ("spec_decode_num_drafts", "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens")
GAUGES = ("sglang_spec_accept_length", "sglang_spec_accept_rate")


COLUMNS = ("spec_drafts", "spec_draft_tokens", "spec_accepted_tokens")


def spec_summary(manifest: dict, ok: pd.DataFrame | None = None) -> dict | None:
    """summary.json `speculative_decoding` (None when neither an endpoint's /metrics nor a
    measured request's usage carried spec-decode figures)."""
    server = _server(manifest)
    per_request = _per_request(ok) if ok is not None else None
    if server is None and per_request is None:
        return None
    return {**(server or {"source": "per-request usage"}), "per_request": per_request}


def _server(manifest: dict) -> dict | None:
    scraped = manifest.get("server_metrics") or {}
    before, after = scraped.get("before") or [], scraped.get("after") or []
    pairs = [(b, a) for b, a in zip(before, after, strict=False) if b and a and KEYS[0] in a]
    counters = _counters(pairs) if pairs else None
    gauges = _gauges([a for a in after if a and GAUGES[0] in a])
    if counters is None and gauges is None:
        return None
    return {
        "source": "vllm counters" if counters else "sglang gauges",
        **(counters or {}),
        **(gauges or {}),
    }


def _counters(pairs: list[tuple[dict, dict]]) -> dict:
    drafts, drafted, accepted = (sum(a.get(k, 0) - b.get(k, 0) for b, a in pairs) for k in KEYS)
    by_pos = _per_position(pairs)
    return {
        "drafts": drafts,
        "draft_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted > 0 else None,
        "mean_accepted_length": 1 + accepted / drafts if drafts > 0 else None,
        "acceptance_by_position": [v / drafts for v in by_pos] if drafts > 0 else [],
        "endpoints_scraped": len(pairs),
    }


def _per_request(ok: pd.DataFrame) -> dict | None:
    """`per_request`: over the ok measured requests whose server reported their counts."""
    if not set(COLUMNS) <= set(ok.columns):
        return None
    counts = ok[list(COLUMNS)].to_numpy(dtype=float)
    counts = counts[~np.isnan(counts).any(axis=1)]
    if not len(counts):
        return None
    drafts, drafted, accepted = counts.sum(axis=0)
    each = counts[counts[:, 1] > 0]  # a request that drafted nothing has no acceptance of its own
    return {
        "requests_reporting": len(counts),
        "drafts": int(drafts),
        "draft_tokens": int(drafted),
        "accepted_tokens": int(accepted),
        "acceptance_rate": accepted / drafted if drafted > 0 else None,
        "mean_accepted_length": 1 + accepted / drafts if drafts > 0 else None,
        "request_acceptance": percentiles(each[:, 2] / each[:, 1]),
    }


def _per_position(pairs: list[tuple[dict, dict]]) -> list[float]:
    """Accepted tokens at each draft position over the run, summed over endpoints."""
    total: list[float] = []
    for b, a in pairs:
        after, before = (
            a.get("spec_decode_accepted_per_pos") or [],
            b.get("spec_decode_accepted_per_pos") or [],
        )
        for i, v in enumerate(after):
            delta = v - (before[i] if i < len(before) else 0.0)
            total += [0.0] * (i + 1 - len(total))
            total[i] += delta
    return total


def _gauges(after: list[dict]) -> dict | None:
    if not after:
        return None
    mean = {k: sum(a.get(k, 0.0) for a in after) / len(after) for k in GAUGES}
    return {
        "last_batch_accept_length": mean["sglang_spec_accept_length"],
        "last_batch_accept_rate": mean["sglang_spec_accept_rate"],
        "gauge_endpoints": len(after),
    }


def figure(summary: Mapping[str, Any], key: str) -> float | None:
    """One speculative-decoding figure of a summary: the counters' where they exist, else the
    gauges' (SGLang), else the per-request counts' sums, else None."""
    spec = summary.get("speculative_decoding") or {}
    fallback = {
        "acceptance_rate": "last_batch_accept_rate",
        "mean_accepted_length": "last_batch_accept_length",
    }
    value = spec.get(key)
    if value is None:
        value = spec.get(fallback.get(key, ""))
    return value if value is not None else (spec.get("per_request") or {}).get(key)
