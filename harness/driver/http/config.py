"""The HTTP target's settings, declared once: `HTTPSettings` (the scenario's `target:` keys the
target reads, composed into the scenario's target as `Load` is into its `load:`) and
`HTTPTargetConfig` (those, the sending settings and what harness/app/build.py resolves: endpoints,
model, key, connection limit). Also its endpoints' URLs, and the redaction of its secrets."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import Field, field_validator, model_validator

from harness.driver.apis import APIS, api_named, server_root
from harness.driver.config import Sending
from harness.driver.http.cache_rules import CacheRules, Prices
from harness.driver.http.network import NetworkSettings
from harness.driver.http.sampling import Sampling
from harness.driver.http.sse import DEFAULT_MAX_EVENT_BYTES
from harness.driver.target import Timeouts
from harness.yamlconf import Strict


class HTTPSettings(Strict):
    """How the HTTP target sends: the scenario's `target:` keys of its own (docs/driver.md)."""

    headers: dict[str, str] = Field(
        default_factory=dict, description="sent with every request (values are never written)"
    )
    send_min_tokens: bool = Field(
        True, description="send min_tokens (off for servers that reject unknown fields)"
    )
    send_ignore_eos: bool = Field(True, description="send ignore_eos")
    continuous_usage: bool | Literal["auto"] = Field(
        "auto",
        description="ask for vLLM's stream_options.continuous_usage_stats (exact tokens per "
        "chunk); auto: on the APIs that have it where /v1/models says vLLM "
        "(harness/driver/http/placing.py)",
    )
    cache_details: bool = Field(
        False,
        description="send SGLang's return_cached_tokens_details: cached tokens by tier "
        "(sglext.cached_tokens_details) in each record",
    )
    tool_choice: Literal["auto", "required", "none"] | None = Field(
        None,
        description="chat: send tool_choice with each request that carries tools (none sent by "
        "default: the server's own default, auto where tools are given)",
    )
    session_id_field: str | None = Field(
        None,
        description="also send the session id in the request body under NAME (X-Session-ID is "
        "always sent)",
    )
    sampling: Sampling = Field(
        Sampling(),
        description="temperature, top_p, top_k, seed sent in each API's own fields (greedy: "
        "temperature 0 unless set; harness/driver/http/sampling.py)",
    )
    preflight: bool = Field(
        True,
        description="before the clock starts: the model must be on /v1/models and one probe "
        "request must succeed",
    )
    timeouts: Timeouts = Timeouts()
    cache_rules: CacheRules = Field(
        CacheRules(),
        description="a hosted API's prompt-cache rules: anthropic, openai, none, or auto (from "
        "the API and the endpoints' hosts; harness/driver/http/cache_rules.py)",
    )
    prices: Prices | None = Field(
        None, description="per million tokens: what caching cost and saved, in money"
    )
    max_connections: int | None = Field(
        None, ge=1, description="HTTP connection pool size (unset: sized to the load)"
    )
    network: NetworkSettings = Field(
        NetworkSettings(),
        description="proxy, trusted CAs, client certificate, redirects, keep-alive "
        "(harness/driver/http/network.py)",
    )

    @field_validator("headers")
    @classmethod
    def _one_line_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if any(c in name + value for c in "\r\n\0") or not name.strip() or ":" in name:
                raise ValueError(f"header {name!r}: a name and a value on one line (no CR, LF)")
        return headers


class HTTPTargetConfig(HTTPSettings, Sending):
    """Everything one HTTP target is built from. `of` takes the scenario's settings as they were
    validated and adds what harness/app/build.py resolves; tests and benchmarks build it directly,
    with the scenario's defaults."""

    endpoints: tuple[str, ...]  # base URLs: http://host:port or http://host:port/v1
    model: str
    api_key: str | None = Field(None, repr=False, exclude=True)  # never dumped, never shown
    tokenizer: str | None = None  # places a multi-token event's tokens by its text (placing.py)
    max_connections: int = Field(256, ge=1)  # resolved: always set
    max_event_bytes: int = Field(DEFAULT_MAX_EVENT_BYTES, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _rules_resolved(cls, data: Any) -> Any:
        """`cache_rules: auto` decided here, from the API and the endpoints' hosts, so a
        target built directly and one built from a scenario send the same."""
        if not isinstance(data, dict) or "endpoints" not in data:
            return data
        rules = CacheRules.model_validate(data.get("cache_rules", CacheRules()))
        api = data.get("api", Sending.model_fields["api"].default)
        return data | {"cache_rules": rules.resolved(api, list(data["endpoints"]))}

    @classmethod
    def of(cls, settings: HTTPSettings, **resolved: Any) -> HTTPTargetConfig:
        """`settings` (a scenario's target: HTTPSettings and Sending) as validated, with the
        resolved values (endpoints, model, api_key, max_connections, tokenizer)."""
        names = [*HTTPSettings.model_fields, *Sending.model_fields]
        parts = {name: getattr(settings, name) for name in names}
        return cls(**(parts | {k: v for k, v in resolved.items() if v is not None}))

    def sampled(self) -> dict:
        """The sampling fields the API's requests carry (its entry says which it cannot)."""
        return self.sampling.fields(api_named(self.api).not_carried)

    def secrets(self) -> tuple[str, ...]:
        """Values never to write: the key, header values, a URL's password and query values."""
        found = [self.api_key or "", *self.headers.values()]
        for e in self.endpoints:
            parts = urlsplit(e)
            found += [parts.password or "", *(v for _, v in parse_qsl(parts.query))]
        proxy = self.network.proxy
        if "@" in proxy:  # a proxy URL's password
            found.append(urlsplit(proxy if "://" in proxy else "http://" + proxy).password or "")
        return tuple(sorted({f for f in found if len(f) >= 4}, key=len, reverse=True))


# /models `owned_by` of the servers that report usage on every event when asked (vLLM; the
# reference server), on the APIs whose entry says they carry it
PER_EVENT_USAGE = ("vllm", "agentic-harness")


def endpoint_url(base: str, api: str, resource: str | None = None, model: str = "") -> str:
    """Where `api`'s requests for `model` go under the endpoint `base` (or `resource`, e.g.
    "/models", under the API's version segment): the entry builds it on the server's root
    (apis/urls.py: a base with or without a version segment, or an API's own URL; its query
    string kept)."""
    entry = api_named(api)
    root = server_root(base, APIS.values())
    return entry.url(root, model) if resource is None else entry.resource_url(root, resource)


def models_url(base: str, api: str) -> str:
    """Where the server at the endpoint `base` lists its models for `api` (the entry says)."""
    return api_named(api).models_url(server_root(base, APIS.values()))


def metrics_url(base: str) -> str:
    """The Prometheus /metrics URL of the server at `base` (any endpoint form: with or without
    a version segment, or an API's own URL): /metrics at the server's root, its query string
    kept."""
    root = server_root(base, APIS.values())
    return root.at(root.path + "/metrics")


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret (and any bearer token) replaced by <redacted>."""
    for secret in secrets:
        text = text.replace(secret, "<redacted>")
    return _BEARER.sub(r"\1<redacted>", text) if "earer" in text else text


_BEARER = re.compile(r"([Bb]earer\s+)[^\s\"',;}]+")
