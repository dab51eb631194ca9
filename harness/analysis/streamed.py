"""Every output token placed in time, or counted where it was not.

A token's time comes from the event that carried it. When a server reports more completion tokens
than its events carried (tokens whose text it held back and no usage delta counted), those have
no arrival time; a request whose every token came that way has no first token and falls out of
TTFT and TPOT. Each is counted here and named in a warning, so a headline's TTFT count below its
ok count says why.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import chunks


def token_placement(ok: pd.DataFrame, manifest: dict | None = None) -> dict:
    """Counts over the ok records: streamed vs reported tokens, and records without a first
    token (so without TTFT); `placement`: how the driver knew each event's tokens (the
    manifest's `target.token_placement`, harness/driver/placing.py; null for older runs)."""
    streamed = chunks.flat(ok["chunk_tokens"]).sums()
    reported = ok["completion_tokens"].to_numpy(dtype=float)
    known = ~np.isnan(reported)
    short = known & (streamed < reported)
    return {
        "requests_ok": int(len(ok)),
        "without_first_token": int(ok["t_first_token"].isna().sum()),
        "requests_short": int(short.sum()),
        "tokens_reported": int(reported[known].sum()),
        "tokens_unplaced": int((reported - streamed)[short].sum()),
        "placement": ((manifest or {}).get("target") or {}).get("token_placement"),
    }


def warnings(placement: dict) -> list[str]:
    out = []
    if placement["requests_short"]:
        out.append(
            f"{placement['requests_short']} of {placement['requests_ok']} ok requests streamed "
            f"fewer tokens than the server's completion_tokens: {placement['tokens_unplaced']} "
            f"of {placement['tokens_reported']} tokens have no arrival time of their own (they "
            f"still count in TPOT's token total; ITL over-weights the events that carried "
            f"them): {_why(placement.get('placement'))}"
        )
    if placement["without_first_token"]:
        out.append(
            f"{placement['without_first_token']} of {placement['requests_ok']} ok requests "
            "streamed no output event at all: they have no TTFT and no TPOT"
        )
    return out


def _why(placement: str | None) -> str:
    """What happened to the tokens, by how the driver placed them."""
    if placement is None or placement.startswith("one token per event"):
        return (
            "the events counted one token each, so tokens of an event that carried several "
            "(a speculating server sends up to k+1 per event) or whose text was held back went "
            "unplaced; usage on every event places them (vLLM chat and completions: "
            "target.continuous_usage, on by default there), else the run's tokenizer places "
            "them by each event's text (workload.tokenizer)"
        )
    if placement.startswith("by text"):
        return (
            "the events counted one token each and the tokenizer placed the rest by each event's "
            "text, but the texts held fewer tokens than the usage says (text held back, or "
            "tokens that merge when re-tokenized)"
        )
    return (
        "usage came on every event, so these tokens came in events that carried no output "
        "text (held back, or a stop token)"
    )
