"""OpenAI's prompt cache (`target.cache_rules: openai`): prompts of 1,024 tokens or more are
cached, hits come in 128-token steps; an in-memory prefix lives 5 to 10 minutes idle and never
past an hour, `prompt_cache_retention: 24h` up to a day (docs/driver.md, "Hosted cache rules")."""

from harness.driver.apis.hosted_cache import HostedCache

OPENAI = HostedCache(
    "openai",
    hosts=("openai.com",),
    default_min=1024,
    step_tokens=128,
    ttl_option="retention",
    ttls={"in-memory": 3600.0, "24h": 86400.0},
    options=("retention",),
)
