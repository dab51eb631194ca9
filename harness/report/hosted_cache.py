"""A hosted API's cache rules and what caching cost, in words (summary.json `cache.hosted`): the
terminal's two lines and the report's note use these."""

from __future__ import annotations

from harness.analysis.summary_types import CacheSummary
from harness.report.numbers import fmt, human


def rules_line(cache: CacheSummary) -> str | None:
    """`anthropic (min 1024 tokens, TTL 300 s): ideal under the rules 0.61; ...`, or None."""
    hosted = cache.get("hosted") or {}
    rules = hosted.get("rules")
    if not rules:
        return None
    ttl = f"{fmt(rules['ttl_s'], 'g')} s" if rules.get("ttl_s") is not None else "not published"
    step = f", {rules['step_tokens']}-token steps" if (rules.get("step_tokens") or 1) > 1 else ""
    return (
        f"{rules['kind']} (min {rules['min_tokens']} tokens, TTL {ttl}{step}): ideal under the "
        f"rules {fmt(hosted['ideal_hit_rate_under_rules'], '.3f')}; "
        f"{hosted['requests_below_minimum']} requests below the minimum "
        f"({human(hosted['ineligible_tokens'])} tokens ineligible); "
        f"{human(hosted['expired_tokens'])} tokens expired"
    )


def cost_line(cache: CacheSummary) -> str | None:
    """`read 76, wrote 409 (5m 409, 1h 0), uncached 126 of 611 prompt tokens; ...`, or None."""
    hosted = cache.get("hosted") or {}
    use = hosted.get("usage")
    if not use:
        return None
    split = ""
    if use.get("cache_write_5m_tokens") is not None or use.get("cache_write_1h_tokens") is not None:
        split = (
            f" (5m {human(use.get('cache_write_5m_tokens') or 0)},"
            f" 1h {human(use.get('cache_write_1h_tokens') or 0)})"
        )
    out = (
        f"read {human(use['cache_read_tokens'])}, wrote {human(use['cache_write_tokens'])}{split},"
        f" uncached {human(use['uncached_tokens'])} of {human(use['prompt_tokens'])} prompt tokens"
    )
    money = hosted.get("cost")
    if money:
        unit = "" if money["unit"] == "money" else " input tokens"
        out += (
            f"; cost {fmt(money['with_cache'], '.4g')}{unit} with the cache vs"
            f" {fmt(money['without_cache'], '.4g')} without: saved {fmt(money['saved'], '.4g')}"
            f" (writes' premium {fmt(money['writes_premium'], '.4g')})"
        )
    return out


def hosted_note(cache: CacheSummary) -> list[str]:
    """The report's lines: `hosted cache rules: ...`, `caching cost: ...` (where known)."""
    lines = (("hosted cache rules", rules_line(cache)), ("caching cost", cost_line(cache)))
    return [f"{label}: {text}" for label, text in lines if text]
