"""Context overflow: the measured requests that did not fit the server's `max_model_len`, and
whether that leaves the run valid (at most 1 % of them, the bound AIPerf marks a run invalid past).

From the records and the manifest's `context_limit` (the driver's policy and each endpoint's
limit, harness/driver/context_limit.py). A request overflows when the trace's prompt plus its
forced output (at least 1) exceeds its endpoint's limit, or when the server refused it for
length (error `ContextOverflow`, or an older run's error whose message says so), or when the
driver skipped it (`ContextOverflowSkipped`). docs/metrics.md, "Context limits".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.loader import Run

INVALID_ABOVE = 0.01  # a run with more than 1 % of its measured requests overflowing is invalid
REFUSED, SKIPPED = "ContextOverflow", "ContextOverflowSkipped"
_MESSAGE = r"maximum context length|model's context length|max_model_len"


def context_summary(run: Run) -> dict:
    """summary.json `context_limit`: the policy, the limits, and the overflowing requests."""
    section = run.manifest.get("context_limit") or {}
    limits = section.get("max_model_len") or {}
    m = run.measured
    flags = _flags(m, limits)
    n, over = len(m), int(flags["overflow"].sum())
    policy = section.get("policy")
    return {
        "policy": policy,
        "max_model_len": limits or None,
        "source": section.get("source"),
        "checked": any(v is not None for v in limits.values()),
        "requests": n,
        "overflow": over,
        "overflow_rate": over / n if n else None,
        "predicted": int(flags["predicted"].sum()),
        "refused": int(flags["refused"].sum()),
        "skipped": int(flags["skipped"].sum()),
        "trimmed": int((flags["predicted"] & ~flags["skipped"]).sum()) if policy == "trim" else 0,
        "invalid_above": INVALID_ABOVE,
        "invalid": bool(n and over / n > INVALID_ABOVE),
    }


def _flags(m: pd.DataFrame, limits: dict) -> pd.DataFrame:
    """Per measured record: predicted to overflow, refused by the server for length, skipped."""
    limit = m["endpoint"].map(lambda e: limits.get(e)).astype(float)  # NaN: no limit known
    prompt = m["prompt_tokens_expected"].astype(float)
    output = np.maximum(1.0, m["output_tokens_expected"].astype(float).fillna(1.0))
    predicted = (prompt + output > limit).fillna(False).astype(bool)
    klass = m["error"].map(lambda e: e.get("class") if isinstance(e, dict) else None)
    message = m["error"].map(lambda e: e.get("message", "") if isinstance(e, dict) else "")
    skipped = klass == SKIPPED
    refused = (klass == REFUSED) | (~skipped & message.str.contains(_MESSAGE, case=False))
    return pd.DataFrame(
        {"predicted": predicted, "refused": refused, "skipped": skipped},
        index=m.index,
    ).assign(overflow=lambda f: f["predicted"] | f["refused"] | f["skipped"])


def validity(context: dict) -> dict:
    """summary.json `validity`: whether the run's figures can be trusted, and why not."""
    reasons = []
    if context.get("invalid"):
        reasons.append(
            f"{context['overflow']} of {context['requests']} measured requests "
            f"({context['overflow_rate']:.1%}) overflow the context (max_model_len "
            f"{_limits(context)}; policy {context['policy'] or 'send'}), more than "
            f"{context['invalid_above']:.0%}"
        )
    return {"valid": not reasons, "reasons": reasons}


def _limits(context: dict) -> str:
    values = sorted({v for v in (context.get("max_model_len") or {}).values() if v is not None})
    return ", ".join(map(str, values)) or "unknown"


def invalid_reasons(summary: Mapping[str, Any]) -> list[str]:
    """Why a run's summary is invalid (empty when valid, or analyzed before validity existed)."""
    return list((summary.get("validity") or {}).get("reasons") or [])
