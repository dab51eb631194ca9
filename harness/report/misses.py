"""Missed prompt tokens in words: each category's label, the split with its shares and their base,
and the server rules the records show (summary.json `cache`; docs/metrics.md, "Where missed tokens
went"). The terminal, the report's tables and notes and its bar all name misses from here."""

from __future__ import annotations

from harness.analysis.summary_types import CacheSummary

LABELS = {
    "cold": "cold",
    "granularity": "server rule: granularity",
    "prompt_cap": "server rule: prompt-1 cap",
    "in_flight": "in flight",
    "misrouted": "misrouted",
    "last_block": "server rule: whole-block prompt's last block",
    "no_hits": "server rule: no hits",
    "ineligible": "hosted rule: below the minimum",
    "expired": "hosted rule: expired (TTL)",
    "evicted": "evicted",
    "unexplained": "unexplained",
    "unreported": "unreported",
}
MEANING = {
    "cold": "no earlier prompt had them",
    "granularity": "shared, but inside the partial last block the server's cache does not hit",
    "prompt_cap": "the last block of a prompt shared whole: at most prompt - 1 tokens are served",
    "in_flight": "an earlier request had them but had not computed them when this one was sent",
    "misrouted": "computed by an earlier request on another endpoint only",
    "last_block": "the last block of a prompt of a whole number of blocks, which the records show"
    " this server never keeps (or its source states so and the records agree)",
    "no_hits": "the server never served a hit in this run",
    "ineligible": "an ideal hit shorter than the hosted API's minimum cacheable prompt: never cached",
    "expired": "a prefix idle longer than the hosted API's cache TTL (refreshed on each use)",
    "evicted": "computed on the same endpoint by an earlier request that finished prefill, not"
    " excluded by a rule the records show: the server had them and lost them",
    "unexplained": "what no rule or evidence explains (a rule with too few cases, unless its"
    " server's source states it, or contradicted,"
    " or no matching trace); never counted as evicted",
    "unreported": "the ideal hit of requests whose server reported no cached tokens",
}
ALWAYS = ("cold", "evicted")  # shown even at 0: "evicted 0" is a finding
RULE_ORDER = ("granularity", "prompt_cap", "last_block", "no_hits")


def label(category: str) -> str:
    return LABELS.get(category, category.replace("_", " "))


def missed_line(cache: CacheSummary) -> str:
    """`12300 of 100000 prompt tokens (12.3% of prompt): cold 8000 (8.0% of prompt), ...`: every
    share is of all prompt tokens, and says so."""
    miss, prompt = cache["miss_tokens"], cache.get("prompt_tokens") or 0.0
    missed = sum(miss.values())

    def share(v: float) -> str:
        return f" ({v / prompt:.1%} of prompt)" if prompt else ""

    parts = [f"{label(k)} {v:.0f}{share(v)}" for k, v in miss.items() if v or k in ALWAYS]
    return f"{missed:.0f} of {prompt:.0f} prompt tokens{share(missed)}: " + ", ".join(parts)


def rules_line(cache: CacheSummary) -> str:
    """Each server rule the analysis tested: its status and cases (`cache.server_rules`)."""
    return "; ".join(
        f"{rule}: {status} ({evidence})" for rule, status, evidence in rule_rows(cache)
    )


def rule_rows(cache: CacheSummary) -> list[tuple[str, str, str]]:
    """(rule, status, its evidence) of each server rule the analysis tested."""
    out = []
    for name in RULE_ORDER:
        r = (cache.get("server_rules") or {}).get(name)
        if r is None or (name == "no_hits" and r["status"] != "detected"):
            continue
        if name == "last_block" and not (r["cases"] or r["against"]):
            continue
        against = f", {r['against']} against" if r["against"] else ""
        cases = "non-zero hits" if name == "granularity" else "cases"
        status = "known from the server's source" if r["status"] == "known" else r["status"]
        out.append((r["rule"], status, f"{r['cases']} {cases}{against}"))
    return out


def meanings(categories) -> list[tuple[str, str]]:
    """(label, meaning) of the categories given, in the usual order."""
    return [(label(k), MEANING[k]) for k in LABELS if k in categories]


def approximate_tag(cache: CacheSummary) -> str:
    """'' for an exact split; else what is missing and the command that makes it exact."""
    ideal = cache.get("ideal") or {}
    if ideal.get("miss_attribution") == "exact":
        return ""
    return (
        " (approximate: no trace.jsonl; exact with `harness replay TRACE --endpoint URL -o RUN`,"
        " which keeps the trace)"
    )
