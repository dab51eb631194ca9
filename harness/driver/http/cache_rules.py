"""The hosted APIs' prompt-cache rules (`target.cache_rules`): what a request asks of the cache,
and the profile the manifest keeps for the analyzer (docs/driver.md, "Hosted cache rules").

A kind is a hosted cache an API entry declares (`API.hosted`, harness/driver/apis/
hosted_cache.py: its hosts, its minimum cacheable prompt per model, its step, its lifetime);
this file reads them, and sends what two of them ask of each request:

- anthropic: `cache_control` breakpoints where Claude Code places them (the last tool, the system
  prompt's last block, the last block of each of the two newest turns: at most four), or the one
  top-level `cache_control` marker; the TTL asked for (`5m` or `1h`).
- openai: `prompt_cache_key` (the session's routing key) and `prompt_cache_retention`.
- none: nothing asked, nothing modelled (self-hosted servers).

`auto` (the default) is the kind of the API's hosted cache whose hosts every endpoint's host
ends in (anthropic.com for messages, openai.com for chat or responses), else none.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from harness.driver.apis import APIS, HostedCache, api_named
from harness.yamlconf import Strict

MAX_BREAKPOINTS = 4
_NOT_HOSTED = ("auto", "none")


def hosted_named(kind: str) -> HostedCache | None:
    """The hosted cache of that kind an API entry declares (None: none does)."""
    return next((h for a in APIS.values() for h in a.hosted if h.kind == kind), None)


def _kinds() -> list[str]:
    return list(dict.fromkeys(h.kind for a in APIS.values() for h in a.hosted))


class Prices(Strict):
    """`target.prices`: what a million tokens of each kind costs (any currency, the same for all)."""

    input: float = Field(ge=0, description="uncached prompt tokens")
    output: float = Field(0.0, ge=0, description="output tokens")
    cache_read: float | None = Field(None, ge=0, description="prompt tokens read from the cache")
    cache_write_5m: float | None = Field(
        None, ge=0, description="prompt tokens written to the cache for 5 minutes (anthropic)"
    )
    cache_write_1h: float | None = Field(
        None, ge=0, description="prompt tokens written to the cache for 1 hour (anthropic)"
    )


class CacheRules(Strict):
    """`target.cache_rules`: a kind (`auto`, `none`, or a hosted cache's: `anthropic`,
    `openai`...) or its options."""

    kind: str = Field(
        "auto",
        description="auto, none, or the kind of a hosted cache an API declares (anthropic, "
        "openai...: harness/driver/apis/)",
    )
    ttl: Literal["5m", "1h"] = Field("5m", description="anthropic: the TTL asked for")
    top_level: bool = Field(
        False,
        description="anthropic: one top-level cache_control (the API marks the last cacheable "
        "block) instead of Claude Code's block breakpoints",
    )
    retention: Literal["in-memory", "24h"] | None = Field(
        None, description="openai: prompt_cache_retention (unset: not sent, in-memory)"
    )
    min_tokens: int | None = Field(
        None, ge=0, description="the minimum cacheable prompt (unset: the model's, from the table)"
    )
    ttl_s: float | None = Field(
        None,
        gt=0,
        description="seconds a prefix lives idle in the analyzer's model (unset: the TTL or "
        "retention asked for); for a server that keeps them otherwise, e.g. a test's fake",
    )

    @field_validator("kind")
    @classmethod
    def _a_known_kind(cls, kind: str) -> str:
        if kind not in _NOT_HOSTED and hosted_named(kind) is None:
            known = ", ".join([*_NOT_HOSTED, *_kinds()])
            raise ValueError(f"cache_rules must be one of {known}, got {kind!r}")
        return kind

    @model_validator(mode="before")
    @classmethod
    def _kind_alone(cls, value: Any) -> Any:
        """`cache_rules: anthropic` is `cache_rules: {kind: anthropic}`."""
        return {"kind": value} if isinstance(value, str) else value

    def __str__(self) -> str:
        """The kind alone when no option is set (the docs' defaults table, `--help`)."""
        return self.kind if not self.model_fields_set - {"kind"} else super().__str__()

    def check(self, api: str) -> None:
        """The kind is one of the API's hosted caches (anthropic's is the messages API's)."""
        if self.kind in _NOT_HOSTED or self.kind in {h.kind for h in api_named(api).hosted}:
            return
        under = [f"{a.name!r}" for a in APIS.values() if any(h.kind == self.kind for h in a.hosted)]
        either = " or ".join(filter(None, [", ".join(under[:-1]), under[-1]]))
        raise ValueError(f"cache_rules {self.kind} needs api {either}, not {api!r}")

    def resolved(self, api: str, endpoints: tuple[str, ...] | list[str]) -> CacheRules:
        """The rules with `auto` decided from the API's hosted caches and the endpoints' hosts."""
        if self.kind != "auto":
            return self
        hosts = [urlsplit(e).hostname or "" for e in endpoints]
        entry = APIS.get(api)
        found = [
            h.kind
            for h in (entry.hosted if entry is not None else ())
            if hosts and all(any(x.endswith(s) for s in h.hosts) for x in hosts)
        ]
        return self.model_copy(update={"kind": found[0] if found else "none"})

    def profile(self, model: str, prices: Prices | None = None) -> dict | None:
        """The manifest's `target.cache_rules`: what the analyzer models (None for none)."""
        hosted = hosted_named(self.kind)
        if hosted is None:
            return None
        out: dict = {"kind": self.kind, "min_tokens": self.minimum(model)}
        asked = getattr(self, hosted.ttl_option) if hosted.ttl_option else None
        for name in hosted.options:
            value = getattr(self, name)
            out[name] = (value or next(iter(hosted.ttls))) if name == hosted.ttl_option else value
        out["step_tokens"] = hosted.step_tokens
        out["ttl_s"] = self.ttl_s or hosted.lifetime(asked)  # None: the API publishes none
        out["prices"] = prices.model_dump() if prices is not None else None
        return out

    def step_tokens(self) -> int | None:
        """The hosted cache's granularity: Anthropic caches at any breakpoint, OpenAI in steps."""
        hosted = hosted_named(self.kind)
        return hosted.step_tokens if hosted is not None else None

    def minimum(self, model: str) -> int:
        if self.min_tokens is not None:
            return self.min_tokens
        hosted = hosted_named(self.kind)
        return hosted.minimum(model) if hosted is not None else 0

    def marker(self) -> dict:
        """The `cache_control` value: the TTL is sent only when it is not the API's default."""
        return {"type": "ephemeral"} | ({"ttl": self.ttl} if self.ttl != "5m" else {})

    def mark_messages(self, body: dict) -> None:
        """An Anthropic body's breakpoints, in place (its blocks are this request's own)."""
        if self.kind != "anthropic":
            return
        if self.top_level:
            body["cache_control"] = self.marker()
            return
        places = [body.get("tools"), body.get("system")]
        places += [turn["content"] for turn in body.get("messages", [])[-2:]]
        for blocks in [p for p in places if p][-MAX_BREAKPOINTS:]:
            blocks[-1] = {**blocks[-1], "cache_control": self.marker()}

    def request_fields(self, sticky_key: str) -> dict:
        """OpenAI's fields: the session's key routes its prompts to one cache."""
        if self.kind != "openai":
            return {}
        out = {"prompt_cache_key": sticky_key}
        return out | ({"prompt_cache_retention": self.retention} if self.retention else {})
