"""An endpoint's base URL: the one parser (scheme, host, port, path, query, credentials) and
its redacted form, which names the same place without user info or query string.

Hosts are IPv4 addresses, IPv6 addresses in brackets (`http://[::1]:8000/v1`) or host names;
ports 1-65535; any path (with or without /v1); a query string is kept on every request (some
gateways take a key there); `user:password@` is sent as HTTP Basic auth. A URL that breaks one
of these is refused with one line saying what to fix.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

_HOST_NAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?$")
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")  # spaces and control characters (CR, LF, ...)


@dataclass(frozen=True)
class EndpointURL:
    """A parsed endpoint; `host` as written in the URL (an IPv6 address keeps its brackets)."""

    scheme: str
    host: str
    port: int | None
    path: str
    query: str
    credentials: bool  # user info (user:password@) in the URL

    @property
    def redacted(self) -> str:
        """The same scheme, host, port and path; no user info, no query string."""
        netloc = self.host if self.port is None else f"{self.host}:{self.port}"
        return urlunsplit((self.scheme, netloc, self.path, "", ""))


def parse_endpoint(url: str) -> EndpointURL:
    """`url` parsed, or a `ValueError` whose message is one line saying what is wrong."""
    if _FORBIDDEN.search(url):
        raise ValueError("an endpoint URL holds no spaces or control characters (CR, LF, tabs)")
    if "://" not in url:
        raise ValueError(f"{shown(url)!r} has no scheme: add http:// (http://{shown(url)})")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{shown(url)!r}: {_why(url, exc)}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{shown(url)!r} is not an http:// or https:// URL")
    host = _host(url, parts)
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{shown(url)!r}: port {port} is out of range (1-65535)")
    if parts.fragment or url.endswith("#"):
        raise ValueError(f"{shown(url)!r}: a fragment (#...) is never sent; remove it")
    return EndpointURL(parts.scheme, host, port, parts.path, parts.query, "@" in parts.netloc)


def basic_auth(url: str) -> str | None:
    """The `Authorization` value (HTTP Basic) of the user info in `url`, percent-decoded as a
    browser would send it; None without user info."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def redact_url(url: str) -> str:
    """`url` without user info or query string (where a request goes, and nothing secret). An
    in-process engine's endpoint is a name ("inprocess", "inprocess-1"), not a URL: kept as it is."""
    if "://" not in url and url.startswith("inprocess"):
        return url
    return parse_endpoint(url).redacted


def shown(url: str) -> str:
    """Any text given as a URL, as an error may quote it: no user info, no query string."""
    head, sep, rest = url.partition("://")
    if not sep:
        head, rest = "", head
    netloc, slash, path = rest.partition("/")
    netloc = netloc.rpartition("@")[2].partition("?")[0]
    path = path.partition("?")[0].partition("#")[0]
    return f"{head}{sep}{netloc}{slash}{path}"


def _host(url: str, parts: SplitResult) -> str:
    """The host as written (brackets kept), checked: an IP address or a host name."""
    written = parts.netloc.rpartition("@")[2]
    if written.startswith("["):
        return written[: written.index("]") + 1]  # urlsplit checked the address inside
    host = written.rpartition(":")[0] if ":" in written else written
    if not host:
        raise ValueError(f"{shown(url)!r} names no host")
    if not _HOST_NAME.match(host) or ".." in host:
        raise ValueError(f"{shown(url)!r}: {host!r} is not a host name or an address")
    if host.replace(".", "").isdigit():
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{shown(url)!r}: {host!r} is not an IPv4 address") from None
    return host


def _why(url: str, exc: ValueError) -> str:
    """urlsplit's complaint, as what to fix."""
    text = str(exc)
    if "Port out of range" in text:
        return "the port is out of range (1-65535)"
    netloc = url.partition("://")[2].partition("/")[0].rpartition("@")[2]
    if "cast to integer" in text:
        if netloc.count(":") > 1 and not netloc.startswith("["):
            return "an IPv6 address goes in brackets, e.g. http://[::1]:8000/v1"
        return f"the port {netloc.rpartition(':')[2]!r} is not a number"
    return f"not a valid host ({text})"
