"""Gemini's implicit prompt cache (`target.cache_rules: gemini`): on by default for Gemini 2.5
and newer models, nothing to ask for; a hit is a prefix of an earlier request, reported as
`usageMetadata.cachedContentTokenCount`. The minimum cacheable prompt per model is the table of
ai.google.dev/gemini-api/docs/caching, "Last updated 2026-10-13 UTC" (2.5 Flash and Pro 2,048;
3.x and later 4,096; at launch, May 2025: 1,024 for 2.5 Flash, 2,048 for 2.5 Pro). Google
publishes no lifetime for an implicit entry ("send requests with similar prefix in a short
amount of time") nor a step: nothing expires in the analyzer's model unless `ttl_s` is set."""

from harness.driver.apis.hosted_cache import HostedCache

IMPLICIT = HostedCache(
    "gemini",
    hosts=("googleapis.com",),  # generativelanguage.googleapis.com
    minimums=(("gemini-2.5-flash", 2048), ("gemini-2.5-pro", 2048)),
    default_min=4096,  # every newer model in the table (3.5 to 3.8 Flash, 3.1 Pro, 4)
    step_tokens=1,
    ttl_s=None,
)
