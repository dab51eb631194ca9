"""Streams that arrived buffered: a proxy between server and client (nginx's default
`proxy_buffering on`, an ingress, a load balancer) that holds the events back and passes them
on in one piece. Then the first token arrives with the last: TTFT is the whole reply's time
and ITL is zero, so both measure the proxy, not the server.

Per run, over the ok replies of at least `MIN_TOKENS` streamed tokens (a real server spends
real time decoding that many), at the median: the reads per reply (`chunk_times` holds one per
read that carried output), the share of each reply's time from send to its last token that lies
between its first and last token, and the time between its tokens. Buffered: a first-to-last
share under `MAX_SHARE`, and the reply in at most `MAX_READS` reads or its tokens closer than
`MIN_SPACING_S` apart (a buffer passed on over TLS comes as many records read at once: nginx in
front of vLLM gave 28 reads a reply, all within a millisecond). A long prefill alone (a small
share, tokens still spaced by the decode) is not buffering. Summary.json `streaming`; a warning
names it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis import chunks

MIN_TOKENS = 8
MAX_READS = 2.0
MAX_SHARE = 0.05
MIN_SPACING_S = 0.0005  # 2,000 tokens a second a stream: faster than any decode
WARNING = "responses arrived buffered: TTFT and ITL measure the proxy"


def streaming(ok: pd.DataFrame) -> dict | None:
    """Reads per reply and the first-to-last share, at the median; null without a reply
    long enough to tell."""
    tokens = chunks.flat(ok["chunk_tokens"])
    long = tokens.sums() >= MIN_TOKENS
    if not long.any():
        return None
    sent = ok["t_sent"].to_numpy(dtype=float)[long]
    first = ok["t_first_token"].to_numpy(dtype=float)[long]
    last = ok["t_last_token"].to_numpy(dtype=float)[long]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = (last - first) / (last - sent)
        spacing = (last - first) / (tokens.sums()[long] - 1)
    reads = float(np.median(tokens.lengths[long]))
    gap = _median(share)
    apart = _median(spacing)
    at_once = reads <= MAX_READS or (apart is not None and apart < MIN_SPACING_S)
    return {
        "replies": int(long.sum()),
        "reads_per_reply_p50": reads,
        "first_to_last_share_p50": gap,
        "token_spacing_p50_s": apart,
        "buffered": bool(gap is not None and gap < MAX_SHARE and at_once),
    }


def _median(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else None


def warnings(found: dict | None) -> list[str]:
    if not found or not found["buffered"]:
        return []
    reads = found["reads_per_reply_p50"]
    share = 100 * (found["first_to_last_share_p50"] or 0.0)
    return [
        f"{WARNING} (median {reads:g} read{'' if reads == 1 else 's'} a reply of {MIN_TOKENS}+ "
        "tokens, first to last "
        f"token {share:.1f} % of its time, over {found['replies']} replies; a proxy between "
        "server and client held the stream back: turn its buffering off, e.g. nginx's "
        "proxy_buffering off, or X-Accel-Buffering: no from the server)"
    ]
