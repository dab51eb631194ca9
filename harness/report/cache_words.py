"""The prefix cache in words, for the terminal, the tables and the notes alike: the granularity
the ideal is counted in, the token space, the server's own /metrics hit rate, sessions that moved
endpoint, a hosted API's rules and cost (summary.json `cache`, `server_cache`)."""

from __future__ import annotations

from harness.analysis.summary_types import CacheSummary, ServerCache
from harness.report.hosted_cache import cost_line
from harness.report.hosted_cache import rules_line as hosted_rules
from harness.report.numbers import fmt


def granularity_line(g: dict) -> str:
    seen = [
        f"records {g['from_records'] if g['from_records'] is not None else '-'}"
        f" ({g['nonzero_samples']} non-zero)",
        f"/metrics {g['from_metrics'] or '-'}",
    ]
    return f"{g['block_size']} tokens from {g['source']}: {g['reason']} [{', '.join(seen)}]"


def token_space_line(t: dict | None) -> str:
    """summary.json `cache.token_space` in words; empty for trace tokens the server receives as such."""
    if not t or not (t["space"] == "server" or t["approximate"]):
        return ""
    if t["approximate"] and not t.get("prompt_token_mismatches"):
        return f"APPROXIMATE, compare rates not token counts: {t['reason']}"
    line = ("APPROXIMATE, " if t["approximate"] else "") + (
        f"server's tokens: {t['prompts_checked']} prompt_tokens checked against"
        f" the local count, {t['prompt_token_mismatches']} differ"
    )
    first = t.get("first_mismatch")
    if first:
        line += f" (first: request {first['request_id']}, server {first['prompt_tokens']}, local {first['local']})"
    return line


def server_hit(server: ServerCache | None) -> str:
    """The summary's `server_cache` in words."""
    if not server:
        return "not scraped"
    return (
        f"{fmt(server['hit_rate'], '.3f')} ({server['hits']:.0f} of {server['queries']:.0f} prompt"
        f" tokens, {server['endpoints_scraped']} endpoint(s))"
    )


def moves_line(moves: dict) -> str:
    """`cache.session_moves` in words: each side's requests, its missed tokens by evidence, its hit."""
    m, st = moves["moved"], moves["stayed"]
    return (
        f"{m['requests']} requests moved endpoint: {_side(m)}; the {st['requests']} that stayed:"
        f" {_side(st)}"
    )


def _side(m: dict) -> str:
    tokens = f"misrouted {m.get('misrouted_tokens', 0):.0f}, evicted {m['evicted_tokens']:.0f}"
    return f"{tokens} missed tokens, hit {fmt(m['cache_hit_rate'], '.3f')}"


def hosted_lines(c: CacheSummary) -> list[tuple[str, str]]:
    """(label, text) of a hosted API's cache rules and what caching cost (report/hosted_cache.py)."""
    lines = (("hosted cache rules", hosted_rules(c)), ("caching cost", cost_line(c)))
    return [(label, text) for label, text in lines if text]
