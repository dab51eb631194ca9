"""Retried turns: a turn counts once, by its final attempt; the failed attempts are reported.

With the driver's retries on (harness.driver.retry), one turn may have several records, linked
by `session_id` and `turn` and numbered by `attempt`. Every metric uses the final attempt only (an
agent's turn succeeded or failed once); `summary.json` `retries` counts the attempts that were
retried, by error class, and how long the retried turns waited.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.metrics import percentiles


def split_attempts(records: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(final attempts, superseded attempts). Records without `attempt` are attempt 1."""
    attempt = (
        records["attempt"].fillna(1)
        if "attempt" in records
        else pd.Series(1.0, index=records.index)
    )
    if (attempt <= 1).all():
        return records, records.iloc[:0]
    key = [records["session_id"], records["turn"].fillna(-1)]
    last = attempt.groupby(key, sort=False).transform("max")
    final = attempt >= last
    return records[final], records[~final]


def retry_summary(final: pd.DataFrame, superseded: pd.DataFrame) -> dict:
    if superseded.empty:
        return {
            "attempts_retried": 0,
            "turns_retried": 0,
            "turns_recovered": 0,
            "by_class": {},
            "retry_wait_s": percentiles([]),
        }
    turns = superseded.groupby(["session_id", "turn"], sort=False)
    first_sent = turns["t_sent"].min()
    last = final.set_index(["session_id", "turn"]).reindex(first_sent.index)
    classes = superseded["error_class"].where(
        superseded["error_class"].notna(), superseded["status"]
    )
    return {
        "attempts_retried": int(len(superseded)),
        "turns_retried": int(len(first_sent)),
        "turns_recovered": int((last["status"] == "ok").sum()),
        "by_class": {str(k): int(v) for k, v in classes.value_counts().sort_index().items()},
        "retry_wait_s": percentiles((last["t_sent"] - first_sent).to_numpy(dtype=float)),
    }
