"""Agent-like retries: which failed requests a real agent would send again, and when.

Off by default (`attempts: 1`): a strict benchmark records a failure and moves on. With retries
on, a request that failed for a reason worth retrying (the server was unreachable, overloaded or
rate-limiting) is sent again after an exponential backoff, `backoff_s x multiplier^(n-1)` for the
n-th retry, capped at `max_backoff_s`, less up to `jitter` of it (deterministic per request and
attempt, so repeated runs back off alike), and never sooner than the server's `Retry-After`.
Every attempt is its own record (`attempt` 1, 2, ...); the analyzer counts a turn by its final
attempt and reports the failed ones (docs/metrics.md, "Retries").
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from harness.yamlconf import Strict

# Connection refused / reset before a response, no connection in time, dropped mid-stream, 429, 503, 529 (Anthropic's
# "overloaded"), and an error object in the stream that says the server is overloaded.
RETRY_ON = (
    "ConnectError",
    "ConnectTimeout",
    "ConnectionClosed",
    "HTTP429",
    "HTTP503",
    "HTTP529",
    "Overloaded",
)


class RetryPolicy(Strict):
    """The scenario's `load.retry`: which failures are sent again, how often, how late."""

    attempts: int = Field(1, ge=1, description="sends per turn at most; 1 = no retries")
    backoff_s: float = Field(0.5, ge=0, description="seconds before the first retry")
    multiplier: float = Field(
        2.0, ge=1, description="each further backoff is this many times longer"
    )
    max_backoff_s: float = Field(30.0, ge=0, description="the longest backoff, seconds")
    jitter: float = Field(
        0.2, ge=0, lt=1, description="each backoff is shortened by up to this fraction"
    )
    retry_on: tuple[str, ...] = Field(
        RETRY_ON, description="the error classes retried (null: the default list)"
    )

    @field_validator("retry_on", mode="before")
    @classmethod
    def _default_when_null(cls, value: Any) -> Any:
        # scenario.yaml files written before this was one model hold `retry_on: null`
        return RETRY_ON if value is None else value

    @property
    def enabled(self) -> bool:
        return self.attempts > 1

    def delay(self, rec: Mapping[str, Any]) -> float | None:
        """Seconds to wait after the failed attempt `rec` before the next one; None: no retry."""
        attempt = rec.get("attempt") or 1
        if (
            rec["status"] == "ok"
            or attempt >= self.attempts
            or (kind := failure_kind(rec)) is None
            or kind not in self.retry_on
        ):
            return None
        base = min(self.max_backoff_s, self.backoff_s * self.multiplier ** (attempt - 1))
        base *= 1 - self.jitter * random.Random(f"{rec['request_id']}#{attempt}").random()
        retry_after = (rec.get("error") or {}).get("retry_after_s")
        return max(base, retry_after or 0.0)


def failure_kind(rec: Mapping[str, Any]) -> str | None:
    """The record's error class; a stream error that says the server is overloaded is `Overloaded`."""
    err = rec.get("error")
    if rec["status"] == "cancelled" or not err:
        return None
    if err["class"] == "StreamError" and "overload" in err.get("message", "").lower():
        return "Overloaded"
    return err["class"]
