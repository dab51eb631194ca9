"""How an HTTP request fails, as a target `Failure`: an error status (with its Retry-After), a
failure on the wire (wire.py's `WireError`), or a deadline the watchdog enforced."""

from __future__ import annotations

import datetime as dt
import email.utils

import orjson

from harness.driver import clock
from harness.driver.apis import error_message
from harness.driver.http.error_text import one_line
from harness.driver.http.watchdog import Watchdog
from harness.driver.http.wire import Response, WireError
from harness.driver.target import Failure, Timeouts

_perf = clock.now


def http_failure(resp: Response, message: str | None = None) -> Failure:
    """An error status, with the server's message from the body read so far (or `message`),
    as one line; the body itself kept beside it when the line is not all of it."""
    body = bytes(resp.body)
    text = body.decode("utf-8", "replace")
    full = message or http_error_message(resp.status, resp.reason, body)
    status, sep, said = full.partition(": ")  # "HTTP 502 Bad Gateway: <the server's text>"
    line = one_line(status) + sep + one_line(said)
    wait = retry_after_s(resp.headers.get("retry-after"))
    kept = text if text.strip() and not line.endswith(text.strip()) else None
    return Failure(_perf(), "error", f"HTTP{resp.status}", line, wait, kept)


def wire_failure(err: WireError) -> Failure:
    if err.error_class == "ConnectTimeout":
        return Failure(_perf(), "timeout", err.error_class, str(err))
    return Failure(_perf(), "error", err.error_class, str(err))


def timed_out(wd: Watchdog, tm: Timeouts) -> Failure | None:
    """The watchdog's verdict, if it ended the exchange or cut the wait for a connection."""
    reason = wd.reason
    if reason is None:
        return None
    return Failure(_perf(), "timeout", reason, timeout_message(reason, tm))


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header (seconds, or an HTTP date) as seconds from now; None if absent/bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def timeout_message(reason: str, tm: Timeouts) -> str:
    return {
        "TTFTTimeout": f"no first token within {tm.ttft}s",
        "IdleTimeout": f"no data for {tm.idle}s after output started",
        "TotalTimeout": f"request exceeded {tm.total}s in total",
    }[reason]


def http_error_message(status: int, reason: str, body: bytes) -> str:
    """`HTTP 429 Too Many Requests: <the server's message>` from an error response's status
    line and the start of its body (the wire keeps at most its COLLECT_BYTES)."""
    msg = body.decode("utf-8", "replace").strip()
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        for key in ("error", "message", "detail"):
            if obj.get(key):
                msg = error_message(obj[key])
                break
    return f"HTTP {status} {reason}".rstrip() + (f": {msg[:500]}" if msg else "")
