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
from dataclasses import dataclass

from harness.errors import InputError

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


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 1  # sends per turn at most; 1 = no retries
    backoff_s: float = 0.5
    multiplier: float = 2.0
    max_backoff_s: float = 30.0
    jitter: float = 0.2  # each backoff is shortened by up to this fraction
    retry_on: tuple[str, ...] = RETRY_ON

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InputError(f"must be >= 1, got {self.attempts}", field="retry.attempts")
        for name in ("backoff_s", "max_backoff_s"):
            if getattr(self, name) < 0:
                raise InputError(f"must be >= 0, got {getattr(self, name)}", field=f"retry.{name}")
        if self.multiplier < 1:
            raise InputError(f"must be >= 1, got {self.multiplier}", field="retry.multiplier")
        if not 0 <= self.jitter < 1:
            raise InputError(f"must be in [0, 1), got {self.jitter}", field="retry.jitter")

    @property
    def enabled(self) -> bool:
        return self.attempts > 1

    def delay(self, rec: dict) -> float | None:
        """Seconds to wait after the failed attempt `rec` before the next one; None: no retry."""
        attempt = rec.get("attempt") or 1
        if (
            rec["status"] == "ok"
            or attempt >= self.attempts
            or failure_kind(rec) not in self.retry_on
        ):
            return None
        base = min(self.max_backoff_s, self.backoff_s * self.multiplier ** (attempt - 1))
        base *= 1 - self.jitter * random.Random(f"{rec['request_id']}#{attempt}").random()
        retry_after = (rec.get("error") or {}).get("retry_after_s")
        return max(base, retry_after or 0.0)


def failure_kind(rec: dict) -> str | None:
    """The record's error class; a stream error that says the server is overloaded is `Overloaded`."""
    err = rec.get("error")
    if rec["status"] == "cancelled" or not err:
        return None
    if err["class"] == "StreamError" and "overload" in err.get("message", "").lower():
        return "Overloaded"
    return err["class"]
