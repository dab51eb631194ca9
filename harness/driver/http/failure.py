"""How an HTTP request fails, as a target `Failure`: an error status (with its Retry-After), a
transport error, or a deadline the watchdog enforced."""

from __future__ import annotations

import datetime as dt
import email.utils

import aiohttp

from harness.driver import clock
from harness.driver.http.apis.openai.decode import http_error_message
from harness.driver.http.watchdog import Watchdog
from harness.driver.target import Failure, Timeouts

_perf = clock.now


async def http_failure(resp: aiohttp.ClientResponse) -> Failure:
    message = await http_error_message(resp)
    wait = retry_after_s(resp.headers.get("Retry-After"))
    return Failure(_perf(), "error", f"HTTP{resp.status}", message, wait)


def transport_failure(exc: BaseException, tm: Timeouts, started: bool) -> Failure:
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return Failure(_perf(), "timeout", "ConnectTimeout", f"no connection within {tm.connect}s")
    if isinstance(exc, TimeoutError):  # aiohttp's read timeout, a backstop to the watchdog's
        reason = "IdleTimeout" if started else "TTFTTimeout"
        return Failure(_perf(), "timeout", reason, timeout_message(reason, tm))
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return Failure(_perf(), "error", "ConnectionClosed", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Failure(_perf(), "error", "ConnectError", str(exc))
    if isinstance(exc, aiohttp.ClientOSError):  # reset while sending, e.g. on a pooled connection
        return Failure(_perf(), "error", "ConnectError", f"{type(exc).__name__}: {exc}")
    return Failure(_perf(), "error", type(exc).__name__, str(exc) or type(exc).__name__)


def timed_out(wd: Watchdog, tm: Timeouts, exc: BaseException | None = None) -> Failure | None:
    """The watchdog's verdict, if it closed the response or cut the wait for headers; for a
    plain `TimeoutError` it did not raise, the deadline that has passed, if any."""
    reason = wd.reason
    if reason is None and type(exc) is TimeoutError:
        reason = wd.passed()
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
