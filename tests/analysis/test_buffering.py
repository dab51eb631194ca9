"""A buffered stream told apart from a streamed one (harness/analysis/buffering.py), on records
made here: a buffering proxy hands each reply over in one read, its first token with its last."""

from __future__ import annotations

import pandas as pd

from harness.analysis import buffering


def replies(reads: int, tokens: int = 12, decode_s: float = 0.1, n: int = 5) -> pd.DataFrame:
    rows = []
    for i in range(n):
        sent, first = 10.0 * i, 10.0 * i + 0.05
        times = [first + decode_s * k / max(1, reads - 1) for k in range(reads)]
        per = [tokens // reads] * reads
        per[-1] += tokens - sum(per)
        rows.append(
            {
                "t_sent": sent,
                "t_first_token": times[0],
                "t_last_token": times[-1],
                "chunk_times": times,
                "chunk_tokens": per,
            }
        )
    return pd.DataFrame(rows)


def test_one_read_a_reply_with_its_first_token_at_its_last_is_buffered():
    found = buffering.streaming(replies(reads=1))
    assert found is not None and found["buffered"] and found["reads_per_reply_p50"] == 1
    (warning,) = buffering.warnings(found)
    assert warning.startswith(buffering.WARNING) and "5 replies" in warning


def test_a_reply_read_as_it_was_decoded_is_not():
    found = buffering.streaming(replies(reads=12))
    assert found is not None and not found["buffered"] and buffering.warnings(found) == []


def test_two_reads_far_apart_are_not_buffered():
    assert not buffering.streaming(replies(reads=2))["buffered"]


def test_short_replies_cannot_tell():
    assert buffering.streaming(replies(reads=1, tokens=3)) is None


def test_many_reads_at_once_are_buffered_and_a_long_prefill_is_not():
    tls = replies(reads=12, decode_s=0.0005)  # TLS records of one buffer, read back to back
    assert buffering.streaming(tls)["buffered"]
    long_prefill = replies(reads=12, decode_s=0.1)
    long_prefill["t_sent"] -= 20.0  # 20 s of prefill: a small share, the tokens still spaced
    found = buffering.streaming(long_prefill)
    assert found["first_to_last_share_p50"] < buffering.MAX_SHARE and not found["buffered"]
