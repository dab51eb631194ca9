"""Speculative decoding over the run: how many drafted tokens the server accepted, from its
/metrics scraped before and after (manifest `server_metrics`, harness/prometheus.py).

vLLM counts drafts (one verify step of one request), drafted tokens, accepted tokens and accepted
tokens by draft position; the figures are its own (vLLM's spec-decode logging):

- acceptance rate = Δaccepted / Δdrafted tokens (draft tokens only; the bonus token excluded),
- mean accepted length = 1 + Δaccepted / Δdrafts (tokens a verify step emits, the bonus included),
- acceptance by position i = Δaccepted at position i / Δdrafts.

SGLang exports gauges, its scheduler's figures over the last logged batch rather than counters:
they are reported as read after the run, marked so, never differenced. docs/metrics.md,
"Speculative decoding".
"""

from __future__ import annotations

KEYS = ("spec_decode_num_drafts", "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens")
GAUGES = ("sglang_spec_accept_length", "sglang_spec_accept_rate")


def spec_summary(manifest: dict) -> dict | None:
    """summary.json `speculative_decoding` (None when no endpoint exported spec-decode figures)."""
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


def figure(summary: dict, key: str) -> float | None:
    """One speculative-decoding figure of a summary: the counters' where they exist, else the
    gauges' (SGLang), else None."""
    spec = summary.get("speculative_decoding") or {}
    fallback = {
        "acceptance_rate": "last_batch_accept_rate",
        "mean_accepted_length": "last_batch_accept_length",
    }
    value = spec.get(key)
    return value if value is not None else spec.get(fallback.get(key, ""))
