"""Anthropic's prompt cache (`target.cache_rules: anthropic`): `cache_control` breakpoints, a
TTL of 5 minutes or an hour, a minimum cacheable prompt per model, read from Anthropic's
prompt-caching page (docs.anthropic.com, "Prompt caching", "Cache limitations") as quoted in
the anthropic-sdk-python issue tracker on 2026-12-02 (docs/driver.md, "Hosted cache rules")."""

from harness.driver.apis.hosted_cache import HostedCache

ANTHROPIC = HostedCache(
    "anthropic",
    hosts=("anthropic.com",),
    minimums=(
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
    ),
    default_min=1024,
    step_tokens=1,  # cached at the breakpoint, any length
    ttl_option="ttl",
    ttls={"5m": 300.0, "1h": 3600.0},
    options=("ttl", "top_level"),
)
