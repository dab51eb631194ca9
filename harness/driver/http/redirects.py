"""Which redirect is followed, and the one line for one that is not.

307 and 308 keep the method and the body: followed for any request, at most
`max_redirects` times, to another scheme, host or port only with `redirect_other_hosts`. 301,
302 and 303 turn a POST into a GET, so they are followed for a GET alone; for a POST they are one
line naming the `Location` to give as the endpoint instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

from harness.driver.endpoint import parse_endpoint, shown
from harness.driver.http.network import NetworkSettings
from harness.driver.http.wire import WireError

KEEPS_METHOD = (307, 308)
GET_ONLY = (301, 302, 303)


def next_hop(
    status: int,
    headers: Mapping[str, str],
    url: str,
    method: str,
    settings: NetworkSettings,
    followed: int,
) -> str | None:
    """The URL to send the same request to next; None: `status` is not a redirect to follow.
    A redirect that is not followed raises a WireError of class `HTTP<status>` (one line)."""
    if status not in KEEPS_METHOD and not (status in GET_ONLY and method in ("GET", "HEAD")):
        if status in GET_ONLY:
            where = headers.get("location", "")
            raise _refused(
                status, where, "a POST is not sent again after it (it would become a GET)"
            )
        return None
    location = headers.get("location")
    if not location:
        raise WireError(f"HTTP{status}", f"HTTP {status} from {shown(url)} without a Location")
    target = urljoin(url, location.strip())
    try:
        parse_endpoint(target)
    except ValueError as exc:
        raise _refused(status, target, f"not a URL to send to ({exc})") from None
    if followed >= settings.max_redirects:
        why = f"more than {settings.max_redirects} redirects (--max-redirects)"
        raise _refused(status, target, why)
    if _origin(target) != _origin(url) and not settings.redirect_other_hosts:
        raise _refused(status, target, "another host; --redirect-other-hosts follows it")
    return target


def _refused(status: int, location: str, why: str) -> WireError:
    text = f"HTTP {status} redirect to {shown(location) or '(no Location)'}, not followed: {why}"
    return WireError(f"HTTP{status}", text + "; or give that URL as the endpoint")


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)
