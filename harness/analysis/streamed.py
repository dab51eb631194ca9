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


def token_placement(ok: pd.DataFrame) -> dict:
    """Counts over the ok records: streamed vs reported tokens, and records without a first
    token (so without TTFT)."""
    streamed = np.array([sum(c) if c else 0 for c in ok["chunk_tokens"].to_numpy()], dtype=float)
    reported = ok["completion_tokens"].to_numpy(dtype=float)
    known = ~np.isnan(reported)
    short = known & (streamed < reported)
    return {
        "requests_ok": int(len(ok)),
        "without_first_token": int(ok["t_first_token"].isna().sum()),
        "requests_short": int(short.sum()),
        "tokens_reported": int(reported[known].sum()),
        "tokens_unplaced": int((reported - streamed)[short].sum()),
    }


def warnings(placement: dict) -> list[str]:
    out = []
    if placement["requests_short"]:
        out.append(
            f"{placement['requests_short']} of {placement['requests_ok']} ok requests streamed "
            f"fewer tokens than the server's completion_tokens: {placement['tokens_unplaced']} "
            f"of {placement['tokens_reported']} tokens came in no event that carried output, "
            "so they have no arrival time (they still count in TPOT's token total); a server "
            "that reports usage on every event places them all (vLLM: --continuous-usage)"
        )
    if placement["without_first_token"]:
        out.append(
            f"{placement['without_first_token']} of {placement['requests_ok']} ok requests "
            "streamed no output event at all: they have no TTFT and no TPOT"
        )
    return out
