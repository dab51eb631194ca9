"""Where an endpoint's requests go: its server root, from which each API entry builds its own URL
and its model list's (`API.url`, `API.models_url`).

An endpoint is a base URL: a server's root, with or without an API's version segment (`/v1`,
Gemini's `/v1beta`), or one API's own URL (`http://h/v1/chat/completions`). Its query string
is kept on every URL built from it (a key some gateways take there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit, urlunsplit

if TYPE_CHECKING:
    from harness.driver.apis.api import API


@dataclass(frozen=True)
class Root:
    """An endpoint's server root: `path` is where every API's version segment starts."""

    scheme: str
    netloc: str
    path: str
    query: str
    given: str | None  # the API whose own URL the endpoint is, if it is one
    given_path: str  # the endpoint's path as given

    def at(self, path: str, query: str = "") -> str:
        """The URL of `path` on this server: the endpoint's query, and `query`'s keys it lacks."""
        have = {k for k, _ in parse_qsl(self.query, keep_blank_values=True)}
        extra = [p for p in query.split("&") if p and p.split("=", 1)[0] not in have]
        joined = "&".join([self.query, *extra] if self.query else extra)
        return urlunsplit((self.scheme, self.netloc, path, joined, ""))


def server_root(base: str, apis: Iterable[API]) -> Root:
    """`base` less any API's own URL (its path, with or without its version segment) and then
    less a version segment of one of `apis`."""
    parts = urlsplit(base)
    path, query, given = parts.path.rstrip("/"), parts.query, None
    entries = sorted(apis, key=lambda a: len(a.path), reverse=True)  # /chat/completions first
    for api in entries:
        found = tail(api).search(path)
        if found is not None:
            path, given = path[: found.start()], api.name
            query = _without(query, api.query)  # its own (alt=sse) is not the server's
            break
    for version in sorted({a.version for a in entries}, key=len, reverse=True):
        if path.endswith(version):
            path = path[: -len(version)]
            break
    return Root(parts.scheme, parts.netloc, path, query, given, parts.path)


def tail(api: API) -> re.Pattern[str]:
    """The end of a path that is `api`'s own URL: its path (any model in it), its version before
    it or not."""
    own = re.escape(api.path).replace(re.escape("{model}"), "[^/]+")
    return re.compile(f"(?:{re.escape(api.version)})?{own}$")


def _without(query: str, own: str) -> str:
    """`query` less the parameters named in `own`."""
    names = {p.split("=", 1)[0] for p in own.split("&") if p}
    return "&".join(p for p in query.split("&") if p and p.split("=", 1)[0] not in names)
