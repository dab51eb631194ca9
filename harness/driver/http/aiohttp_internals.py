"""aiohttp's private pieces that the timed wire (wire.py) needs: the one module that touches them.

aiohttp has no public hook for either, so an upgrade may move them. `check` looks for each one,
in the shape the wire relies on, when a target starts, and raises `DependencyError` naming the
aiohttp version and the missing piece: a moved internal fails the run at once rather than
quietly stamping every arrival "now" (the time the reading task ran, not when bytes arrived).

- `TCPConnector._factory`: the protocol factory each new connection is made with (a
  `functools.partial` of `ResponseHandler` since aiohttp 3.0); the wire swaps in its own.
- `ResponseHandler._payload`: the protocol's current response body (a `StreamReader`, None
  between responses), which the wire reads from `data_received` to see which body grew.
"""

from __future__ import annotations

import asyncio
import functools

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.streams import StreamReader

from harness.errors import DependencyError

__all__ = ["ResponseHandler", "check", "response_body", "unstamped_body", "use_protocol"]


def _missing(what: str, why: str) -> DependencyError:
    return DependencyError(
        f"aiohttp {aiohttp.__version__}: {what} {why}; the timed wire (harness/driver/http/wire.py) "
        "needs it to stamp arrivals (aiohttp_internals.py says what each piece is for)"
    )


def check(loop: asyncio.AbstractEventLoop, connector: aiohttp.TCPConnector) -> None:
    """Raise `DependencyError` unless each private piece is there, in the expected shape."""
    factory = getattr(connector, "_factory", None)
    if not isinstance(factory, functools.partial) or not (
        isinstance(factory.func, type) and issubclass(factory.func, ResponseHandler)
    ):
        raise _missing("TCPConnector._factory", f"is {factory!r}, not a partial of ResponseHandler")
    handler = ResponseHandler(loop=loop)
    if not hasattr(handler, "_payload") or handler._payload is not None:
        raise _missing("ResponseHandler._payload", "is missing or not None on a new connection")
    if not hasattr(StreamReader(handler, 2**16, loop=loop), "total_bytes"):
        raise _missing("StreamReader.total_bytes", "is missing")


def use_protocol(connector: aiohttp.TCPConnector, protocol: type[ResponseHandler]) -> None:
    """Make `connector`'s new connections speak `protocol` (a `ResponseHandler` subclass)."""
    loop = asyncio.get_running_loop()
    check(loop, connector)
    connector._factory = functools.partial(protocol, loop=loop)


def unstamped_body(protocol: str) -> DependencyError:
    """The error for a response whose body the protocol (`protocol`, its class name) did not
    see arrive: `ResponseHandler._payload` is no longer the body being read."""
    return _missing("ResponseHandler._payload", f"did not name the body being read ({protocol})")


def response_body(handler: ResponseHandler) -> StreamReader | None:
    """The body of the response `handler` is reading now (None between responses)."""
    return handler._payload
