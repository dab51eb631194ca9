"""The hosted APIs' prompt-cache rules (`target.cache_rules`): what a request asks of the cache,
and the profile the manifest keeps for the analyzer (docs/driver.md, "Hosted cache rules").

- anthropic: `cache_control` breakpoints where Claude Code places them (the last tool, the system
  prompt's last block, the last block of each of the two newest turns: at most four), or the one
  top-level `cache_control` marker; the TTL asked for (`5m` or `1h`); a minimum cacheable length
  per model (the table in docs/driver.md, read from Anthropic's prompt-caching page).
- openai: `prompt_cache_key` (the session's routing key) and `prompt_cache_retention`; prompts of
  1,024 tokens or more are cached, hits come in 128-token steps.
- none: nothing asked, nothing modelled (self-hosted servers).

`auto` (the default) is anthropic for the messages API on an anthropic.com endpoint, openai for
chat or responses on an openai.com endpoint, else none.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from harness.yamlconf import Strict

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
# OpenAI keeps an in-memory prefix 5 to 10 minutes idle and never past an hour; `24h` up to a day
RETENTION_SECONDS = {"in-memory": 3600.0, "24h": 86400.0}
OPENAI_MIN_TOKENS, OPENAI_STEP_TOKENS = 1024, 128
MAX_BREAKPOINTS = 4

# Anthropic's minimum cacheable prompt length by model name prefix (docs/driver.md cites the
# page and the date read); the first prefix that matches wins, so longer names come first.
ANTHROPIC_MIN_TOKENS = (
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 1024),
    ("claude-sonnet-4-5", 1024),
    ("claude-opus-4-1", 1024),
    ("claude-opus-4", 1024),
    ("claude-sonnet-4", 1024),
    ("claude-3-7-sonnet", 1024),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
ANTHROPIC_DEFAULT_MIN = 1024  # a model not in the table


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
    """`target.cache_rules`: a kind (`anthropic`, `openai`, `none`, `auto`) or its options."""

    kind: Literal["auto", "anthropic", "openai", "none"] = "auto"
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

    @model_validator(mode="before")
    @classmethod
    def _kind_alone(cls, value: Any) -> Any:
        """`cache_rules: anthropic` is `cache_rules: {kind: anthropic}`."""
        return {"kind": value} if isinstance(value, str) else value

    def __str__(self) -> str:
        """The kind alone when no option is set (the docs' defaults table, `--help`)."""
        return self.kind if not self.model_fields_set - {"kind"} else super().__str__()

    def check(self, api: str) -> None:
        """The kind's API: anthropic's rules are the messages API's, openai's any OpenAI API's."""
        if self.kind == "anthropic" and api != "messages":
            raise ValueError(f"cache_rules anthropic needs api 'messages', not {api!r}")
        if self.kind == "openai" and api == "messages":
            raise ValueError("cache_rules openai is for api chat, completions or responses")

    def resolved(self, api: str, endpoints: tuple[str, ...] | list[str]) -> CacheRules:
        """The rules with `auto` decided from the API and the endpoints' hosts."""
        if self.kind != "auto":
            return self
        hosts = [urlsplit(e).hostname or "" for e in endpoints]
        kind = "none"
        if hosts and all(h.endswith("anthropic.com") for h in hosts) and api == "messages":
            kind = "anthropic"
        elif (
            hosts and all(h.endswith("openai.com") for h in hosts) and api in ("chat", "responses")
        ):
            kind = "openai"
        return self.model_copy(update={"kind": kind})

    def profile(self, model: str, prices: Prices | None = None) -> dict | None:
        """The manifest's `target.cache_rules`: what the analyzer models (None for none)."""
        if self.kind in ("none", "auto"):
            return None
        out: dict = {"kind": self.kind, "min_tokens": self.minimum(model)}
        if self.kind == "anthropic":
            asked = TTL_SECONDS[self.ttl]
            out |= {"ttl": self.ttl, "top_level": self.top_level}
        else:
            asked = RETENTION_SECONDS[self.retention or "in-memory"]
            out |= {"retention": self.retention or "in-memory"}
        out["step_tokens"], out["ttl_s"] = self.step_tokens(), self.ttl_s or asked
        out["prices"] = prices.model_dump() if prices is not None else None
        return out

    def step_tokens(self) -> int | None:
        """The hosted cache's granularity: Anthropic caches at any breakpoint, OpenAI in steps."""
        return {"anthropic": 1, "openai": OPENAI_STEP_TOKENS}.get(self.kind)

    def minimum(self, model: str) -> int:
        if self.min_tokens is not None:
            return self.min_tokens
        if self.kind == "openai":
            return OPENAI_MIN_TOKENS
        name = model.lower()
        return next((n for p, n in ANTHROPIC_MIN_TOKENS if p in name), ANTHROPIC_DEFAULT_MIN)

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
