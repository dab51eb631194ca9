"""The user's network, as every HTTP request of the harness reaches a server: the proxy, the
certificates trusted, the client's own certificate, redirects and idle keep-alive.

`NetworkSettings` is the scenario's `target.network` (and `harness probe`'s flags); `Network` is
it resolved once against the environment, as curl and Python's requests read it:

- proxy: `--proxy URL` for every endpoint, `--no-proxy` for none, else (`env`) `http_proxy` for
  http:// URLs and `https_proxy` for https:// ones (`all_proxy` for either), lower case before
  upper case; `HTTP_PROXY` is ignored inside a CGI request (httpoxy), as requests does.
  `no_proxy` (host names, their subdomains, `.domain`, IP addresses, CIDR blocks, `host:port`,
  `*`) applies to any proxy, the one given by flag included. An http:// URL goes to the proxy in
  absolute form; an https:// one through a CONNECT tunnel (proxy.py).
- trust: `--ca-bundle` (a PEM file or a folder of hashed certificates), else
  `REQUESTS_CA_BUNDLE`, else `CURL_CA_BUNDLE`, else OpenSSL's own (`SSL_CERT_FILE`,
  `SSL_CERT_DIR`, the system store). A bundle replaces the system store, as in requests and curl.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from harness.driver.endpoint import basic_auth, parse_endpoint, shown
from harness.errors import InputError
from harness.yamlconf import Strict

CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")  # read in this order, after --ca-bundle


class NetworkSettings(Strict):
    """How requests reach the endpoints: the scenario's `target.network` (docs/driver.md)."""

    proxy: str = Field(
        "env",
        description="env: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY as curl reads them; "
        "none: no proxy; or a proxy URL (http://[user:password@]host:port) for every endpoint",
    )
    ca_bundle: str | None = Field(
        None,
        description="trust these CA certificates (a PEM file or a hashed folder) instead of the "
        "system's; unset: REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE, the system's",
    )
    client_cert: str | None = Field(
        None, description="mTLS: the client certificate (PEM; may hold the key too)"
    )
    client_key: str | None = Field(None, description="mTLS: the client certificate's key (PEM)")
    insecure: bool = Field(
        False,
        description="do not verify the servers' certificates (warned on every screen, "
        "recorded in the manifest)",
    )
    max_redirects: int = Field(
        5, ge=0, le=30, description="307 and 308 redirects followed per request (0: none)"
    )
    redirect_other_hosts: bool = Field(
        False,
        description="follow a redirect to another scheme, host or port (with the same headers, "
        "the API key included)",
    )
    keepalive_s: float = Field(
        4.0,
        gt=0,
        description="seconds an idle connection is kept for reuse (a server's Keep-Alive "
        "timeout, when shorter, wins): under uvicorn's 5 s, which vLLM and SGLang run",
    )


@dataclass(frozen=True)
class Proxy:
    """A forward proxy: where to connect, its credentials' header, how to name it."""

    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization value (HTTP Basic from the URL)
    shown: str  # its URL without user info, and where it came from

    @property
    def key(self) -> tuple[str, int]:
        return (self.host, self.port)


class Network:
    """`NetworkSettings` resolved against `environ` (by default the process's environment)."""

    def __init__(self, settings: NetworkSettings, environ: Mapping[str, str] | None = None):
        self.settings = settings
        env = dict(os.environ if environ is None else environ)
        try:
            self._proxies = _proxies(settings.proxy, env)
        except ValueError as exc:
            raise InputError(str(exc), field="target.network.proxy") from None
        self._bypass = NoProxy(_variable(env, "no_proxy") or "")
        self._ca, self._ca_source = _ca_bundle(settings.ca_bundle, env)
        self._tls: ssl.SSLContext | None = None
        s = settings
        if s.ca_bundle or s.client_cert or s.client_key or s.insecure:
            self.tls_context()  # a file given that cannot be read: said before anything is sent

    def proxy_for(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy a request to `scheme://host:port` goes through (None: direct)."""
        proxy = self._proxies.get(scheme)
        if proxy is None or self._bypass.matches(host, port):
            return None
        return proxy

    def tls_context(self) -> ssl.SSLContext:
        """The one TLS context: the bundle trusted, the client certificate, or no checks."""
        if self._tls is None:
            try:
                self._tls = _context(self.settings, self._ca)
            except ValueError as exc:
                raise InputError(str(exc), field="target.network") from None
        return self._tls

    @property
    def trusted(self) -> str:
        """The CAs a certificate is checked against, and where that came from."""
        return self._ca_source or "the system's CA store"

    def describe(self) -> dict:
        """For the manifest and the first screen: the proxies, the trust, mTLS, redirects."""
        s = self.settings
        return {
            "proxy": {scheme: p.shown for scheme, p in self._proxies.items()} or None,
            "no_proxy": self._bypass.text or None,
            # the trust a TLS connection used: none named for a run that made none
            "ca_bundle": self._ca_source if self._tls is not None else None,
            "client_cert": s.client_cert,
            "insecure": s.insecure,
            "max_redirects": s.max_redirects,
            "redirect_other_hosts": s.redirect_other_hosts,
            "keepalive_s": s.keepalive_s,
        }


class NoProxy:
    """A `no_proxy` list, matched as curl matches it (and CIDR blocks, as requests does)."""

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self._all = False
        self._names: list[tuple[str, int | None]] = []
        self._nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in self.text.replace(" ", ",").split(","):
            self._add(entry.strip().lower())

    def _add(self, entry: str) -> None:
        if entry == "*":
            self._all = True
            return
        if not entry:
            return
        try:
            self._nets.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            return
        except ValueError:
            pass
        name, port = entry, None
        if entry.count(":") == 1 or entry.startswith("["):  # host:port, [v6]:port
            head, _, tail = entry.rpartition(":")
            if tail.isdigit():
                name, port = head, int(tail)
        self._names.append((name.strip("[]").lstrip("."), port))

    def matches(self, host: str, port: int) -> bool:
        host = host.strip("[]").lower().rstrip(".")
        if self._all:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
        if address is not None and any(address in net for net in self._nets):
            return True
        return any(
            (host == name or host.endswith("." + name)) and want in (None, port)
            for name, want in self._names
        )


def _variable(env: Mapping[str, str], name: str) -> str | None:
    """`name` from the environment, lower case before upper case (as curl and urllib read it)."""
    value = env.get(name.lower())
    if value is None and not (name == "http_proxy" and "REQUEST_METHOD" in env):
        value = env.get(name.upper())
    return value if value else None


def _proxies(setting: str, env: Mapping[str, str]) -> dict[str, Proxy]:
    """The proxy of each scheme: the setting's for both, or the environment's."""
    if setting == "none":
        return {}
    if setting != "env":
        proxy = parse_proxy(setting, "--proxy")
        return {"http": proxy, "https": proxy}
    found = {}
    for scheme in ("http", "https"):
        for name in (f"{scheme}_proxy", "all_proxy"):
            value = _variable(env, name)
            if value:
                found[scheme] = parse_proxy(value, name.upper())
                break
    return found


def parse_proxy(url: str, source: str) -> Proxy:
    """A proxy URL (http://, or no scheme as curl takes it), or a ValueError naming `source`."""
    text = url if "://" in url else "http://" + url
    scheme = text.partition("://")[0].lower()
    if scheme != "http":
        raise ValueError(
            f"{source}={shown(url)!r}: only http:// proxies are supported (an https:// URL goes "
            f"through them by CONNECT), not a {scheme}:// one"
        )
    try:
        parts = parse_endpoint(text)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    host = parts.host.strip("[]")
    port = parts.port or 80
    return Proxy(host, port, basic_auth(text), f"{parts.redacted.rstrip('/')} (from {source})")


def _ca_bundle(given: str | None, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The bundle to trust and where it came from (None, None: OpenSSL's defaults)."""
    if given is not None:
        return given, given
    for name in CA_VARIABLES:
        if env.get(name):
            return env[name], f"{env[name]} (from {name})"
    default = env.get("SSL_CERT_FILE")
    return None, f"{default} (from SSL_CERT_FILE)" if default else None


def _context(s: NetworkSettings, ca: str | None) -> ssl.SSLContext:
    """A client context; a file that cannot be read is a ValueError naming its setting."""
    try:
        if ca is not None and Path(ca).is_dir():
            ctx = ssl.create_default_context(capath=ca)
        else:
            ctx = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"CA bundle {ca}: {_reason(exc)}") from None
    if s.client_cert is not None:
        try:
            ctx.load_cert_chain(s.client_cert, s.client_key, password=_no_password)
        except (OSError, ssl.SSLError, _Encrypted) as exc:
            raise ValueError(f"client certificate {s.client_cert}: {_reason(exc)}") from None
    elif s.client_key is not None:
        raise ValueError("a client key without a client certificate (--client-cert)")
    if s.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class _Encrypted(Exception):
    """A client key that asks for a password: refused rather than prompted for."""


def _no_password() -> str:
    raise _Encrypted("the key is encrypted; give an unencrypted key (--client-key)")


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(getattr(exc, "reason", None) or exc)
