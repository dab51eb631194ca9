"""The HTTP target's settings, its endpoints' URLs, and the redaction of its secrets."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from harness.driver.cache_rules import CacheRules, Prices
from harness.driver.sampling import Sampling
from harness.driver.sse import DEFAULT_MAX_EVENT_BYTES
from harness.driver.target import Timeouts


@dataclass(frozen=True)
class HTTPTargetConfig:
    endpoints: tuple[str, ...]  # base URLs: http://host:port or http://host:port/v1
    model: str
    api: str = "completions"  # a key of API_PATHS
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = ()
    min_tokens: bool = True  # send min_tokens = max_tokens (vLLM, SGLang)
    ignore_eos: bool = True
    # vLLM's stream_options.continuous_usage_stats: "auto" asks for it on chat and completions
    # where every endpoint's /models card names a server that gives it (PER_EVENT_USAGE)
    continuous_usage: bool | str = "auto"
    tokenizer: str | None = None  # places a multi-token event's tokens by its text (placing.py)
    session_id_field: str | None = None  # also put the session id in the body under this name
    cache_details: bool = False  # SGLang's return_cached_tokens_details (cached tokens by tier)
    tool_choice: str | None = None  # chat: sent with the request's tools (auto, required, none)
    sampling: Sampling = Sampling()  # sent in each API's own fields (sampling.py)
    timeouts: Timeouts = Timeouts()
    max_connections: int = 256
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    preflight: bool = False  # at start: the model on /models, one probe request answered
    session_headers: tuple[str, ...] = ("x-session-id",)  # header families (session_headers.py)
    anthropic_version: str = "2023-06-01"  # messages: the `anthropic-version` header
    cache_control: bool = False  # messages: Claude Code's cache_control breakpoints
    previous_response_id: bool = False  # responses: the server keeps the history
    cache_rules: CacheRules = CacheRules(kind="none")  # a hosted API's (cache_rules.py), resolved
    prices: Prices | None = None  # kept in the manifest with the rules, for the analyzer

    def secrets(self) -> tuple[str, ...]:
        """Values never to write: the key, header values, a URL's password and query values."""
        found = [self.api_key or "", *(v for _, v in self.headers)]
        for e in self.endpoints:
            parts = urlsplit(e)
            found += [parts.password or "", *(v for _, v in parse_qsl(parts.query))]
        return tuple(sorted({f for f in found if len(f) >= 4}, key=len, reverse=True))


# /models `owned_by` of the servers that report usage on every event when asked (vLLM; the
# reference server), and the APIs whose streams carry it there
PER_EVENT_USAGE = ("vllm", "agentic-harness")
PER_EVENT_USAGE_APIS = ("chat", "completions")

# Each API's path under /v1.
API_PATHS = {
    "chat": "/chat/completions",
    "completions": "/completions",
    "messages": "/messages",
    "responses": "/responses",
}


def endpoint_url(base: str, api: str, resource: str | None = None) -> str:
    """The URL of `api`'s path (or `resource`, e.g. "/models") under `base`, with or without
    /v1, its query string kept (a key some gateways take there). A `base` that already ends in
    an API's path is that API's URL."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    given = next((p for p in API_PATHS.values() if path.endswith(p)), None)
    if given is not None:
        if resource is None:
            return base
        path = path[: -len(given)]
    path = (path if path.endswith("/v1") else path + "/v1") + (resource or API_PATHS[api])
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret (and any bearer token) replaced by <redacted>."""
    for secret in secrets:
        text = text.replace(secret, "<redacted>")
    return _BEARER.sub(r"\1<redacted>", text) if "earer" in text else text


_BEARER = re.compile(r"([Bb]earer\s+)[^\s\"',;}]+")
