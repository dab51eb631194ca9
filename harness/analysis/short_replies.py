"""Replies shorter than the trace asked for: counted, by API, and named in a warning past a share.

The driver forces each reply's length (`max_tokens` with `min_tokens` / `ignore_eos` where the
server takes them), but a server may drop those fields (vLLM 0.32's Messages route does) or stop
at a stop token anyway. A short reply is an ok record whose `completion_tokens` is below the
length asked for (the trace's output length; at least 1, as the driver asks). Short replies bias
the per-token figures (TPOT and interactivity count over fewer tokens, and a reply that stops
early skips its slowest, longest-context tokens), output throughput, and in live-history mode
the next prompt, which then holds the shorter reply instead of the trace's output.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

WARN_SHARE = 0.005  # more than this share of ok replies short: a warning
BIASED = (
    "TPOT, interactivity and output throughput (fewer tokens than asked)",
    "the next prompt in live-history mode (it holds the shorter reply)",
)


def short_replies(ok: pd.DataFrame, api: str | None) -> dict | None:
    """Summary.json `short_replies`: the run's API and its ok replies that fell short; null when
    no record says how long it should have been."""
    asked = np.maximum(1, ok["output_tokens_expected"].to_numpy(dtype=float))
    got = ok["completion_tokens"].to_numpy(dtype=float)
    known = ~np.isnan(asked) & ~np.isnan(got)
    if not known.any():
        return None
    short = known & (got < asked)
    n, k = int(known.sum()), int(short.sum())
    worst = int(np.argmax(np.where(short, asked - got, -1))) if k else None
    return {
        "api": api,
        "requests": n,
        "short": k,
        "share": k / n,
        "tokens_asked": int(asked[known].sum()),
        "tokens_missing": int((asked - got)[short].sum()),
        "worst": None
        if worst is None
        else {
            "request_id": str(ok["request_id"].iloc[worst]),
            "asked": int(asked[worst]),
            "got": int(got[worst]),
        },
        "biases": list(BIASED) if k else [],
    }


def warnings(short: dict | None) -> list[str]:
    if not short or short["share"] <= WARN_SHARE:
        return []
    w = short["worst"]
    return [
        f"short replies: {short['short']} of {short['requests']} ok {short['api'] or ''} replies "
        f"ended before the trace's output length ({short['tokens_missing']} of "
        f"{short['tokens_asked']} tokens missing; worst {w['request_id']}: {w['got']} of "
        f"{w['asked']}): the server ignored the forced length (min_tokens / ignore_eos) or "
        f"stopped early; this biases {'; '.join(short['biases'])}"
    ]
