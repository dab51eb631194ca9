"""Trace statistics: distributions, ideal prefix-cache hit, and the AgentX fidelity table.

Requests are visited in estimated send order (`timeline.send_order`). Prompt lengths and cache
hits come from segment lengths (`Content.segments`) or, for imported block-mode turns, from their
hash ids (`blockwalk`), never token ids. A turn that extends its previous turn's prompt only walks
what it adds, so the ideal hit of 2,000 default sessions or of a 50k-request corpus takes
seconds; the segment LRU (`cache_tokens`) must still touch every segment of every generated
prompt to keep recency exact, and is several times slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from harness.trace.blockwalk import BlockPaths, Families, IdealBlocks, LruBlocks
from harness.trace.content import Content
from harness.trace.generate import think_samples
from harness.trace.lru import LruPrefixCache
from harness.trace.model import Trace
from harness.trace.prefix import SessionWalks
from harness.trace.profile import Profile
from harness.trace.timeline import send_order


@dataclass(frozen=True)
class StatTarget:
    """A figure a generated trace should reproduce: the stat `key`, its goal and how it is met."""

    key: str  # the stats key the target reads
    label: str
    value: float
    kind: str  # "median" / "p90" (of a distribution, within tolerance), "above", "mean" (within tolerance)
    tokens: bool = False  # scaled by the trace's `scale`
    tolerance: float = 0.05


# The AgentX workload's published shape (the targets below), and the gap between a reply and the next request in the public
# Claude Code corpus (its p99 is ~50 min of human breaks): what the default profile reproduces.
CORPUS_THINK_S = {"p50": 10.0, "p90": 166.0, "p99": 3000.0}
AGENTX_TARGETS = (
    StatTarget("turns_per_main_session", "turns per main session (median)", 43, "median"),
    StatTarget(
        "prompt_tokens", "prompt tokens per request (median)", 142_000, "median", tokens=True
    ),
    StatTarget("output_tokens", "output tokens per request (median)", 444, "median", tokens=True),
    StatTarget("ideal_cache_hit", "ideal prefix reuse, token-weighted", 0.96, "above"),
    StatTarget("main_sessions_with_subagents", "main sessions with >= 1 subagent", 0.44, "mean"),
    StatTarget("subagents_per_parent", "subagents per main session with any (mean)", 4.0, "mean"),
    StatTarget(
        "think_s",
        "think time before a request, s (median)",
        CORPUS_THINK_S["p50"],
        "median",
        tolerance=0.10,
    ),
    StatTarget(
        "think_s",
        "think time before a request, s (p90)",
        CORPUS_THINK_S["p90"],
        "p90",
        tolerance=0.10,
    ),
)


def dist(values) -> dict:
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return {"count": 0, "p50": None, "p90": None, "p99": None, "mean": None}
    p50, p90, p99 = np.percentile(a, [50, 90, 99]).tolist()
    return {"count": int(a.size), "p50": p50, "p90": p90, "p99": p99, "mean": float(a.mean())}


def _cache_hits(
    trace: Trace, block_size: int, cache_tokens: int | None
) -> Iterator[tuple[int, int, int | None, str, int]]:
    """Per request in send order: (prompt tokens, ideal hit, LRU hit or None, agent, output).

    Generated turns walk content segments (`SessionWalks`, `LruPrefixCache`); block-mode turns
    of imported traces walk their hash ids (`blockwalk`), which is what makes a 50k-request
    corpus take seconds. A session's walk state is dropped after its last request."""
    content = Content(trace, cache_size=256)
    ideal = SessionWalks(block_size)
    lru = LruPrefixCache(cache_tokens, block_size) if cache_tokens is not None else None
    paths = BlockPaths(
        trace.header.block_size, private=trace.header.meta.get("hash_id_scope") == "local"
    )
    families = Families(trace)
    ideal_blocks = IdealBlocks(block_size, trace.header.block_size)
    lru_blocks = LruBlocks(cache_tokens, block_size) if cache_tokens is not None else None
    lru_end: dict[str, list] = {}  # session -> LRU path of its last prompt
    for _, sid, k in send_order(trace):
        session = trace.session(sid)
        turns = session.turns
        last = k == len(turns) - 1
        if turns[k].hash_ids is not None:
            family = families.root[sid]
            path = paths.walk(sid, turns[k], parent=session.parent, last=last, family=family)
            hit, total = ideal_blocks.observe(path, paths.nodes), path.total
            lru_hit = lru_blocks.observe(sid, path, paths.nodes) if lru_blocks is not None else None
            if last and lru_blocks is not None:
                lru_blocks.forget(sid)
            if families.sent(sid):
                paths.finish(family)
            yield total, hit, lru_hit, session.agent, turns[k].output_tokens
            continue
        extends = content.appends_to_previous(sid, k)
        segs = content.new_segments(sid, k) if extends else content.segments(sid, k)
        hit, total = ideal.observe(sid, k, segs, appended=extends)
        lru_hit = None
        if lru is not None:
            lru_hit, lru_end[sid] = lru.extend(lru_end[sid] if extends else [], segs)
        if last:
            ideal.forget(sid)
            lru_end.pop(sid, None)
        yield total, hit, lru_hit, session.agent, turns[k].output_tokens


def by_agent(per_req: list[tuple], lru: bool) -> dict[str, dict]:
    """Main sessions' and subagents' requests apart: counts, tokens and hits of each."""
    out = {}
    for agent in ("main", "sub"):
        rows = [r for r in per_req if r[3] == agent]
        prompt = float(sum(r[0] for r in rows))
        out[agent] = {
            "requests": len(rows),
            "prompt_tokens": prompt,
            "prompt_tokens_per_request": dist([r[0] for r in rows]),
            "output_tokens": float(sum(r[4] for r in rows)),
            "ideal_cache_hit": sum(r[1] for r in rows) / prompt if prompt else None,
        }
        if lru:
            out[agent]["lru_cache_hit"] = (
                sum(r[2] for r in rows if r[2] is not None) / prompt if prompt else None
            )
    return out


def ideal_cache_hit(trace: Trace, block_size: int = 16) -> float | None:
    """The trace's ideal prefix-cache hit ratio, token-weighted over its requests (an infinite
    cache at `block_size`, in the trace's own tokens); None for a trace without prompt tokens."""
    per_req = list(_cache_hits(trace, block_size, None))
    prompt = sum(r[0] for r in per_req)
    return sum(r[1] for r in per_req) / prompt if prompt else None


def compute_stats(
    trace: Trace,
    *,
    block_size: int = 16,
    cache_tokens: int | None = None,
    profile: Profile | None = None,
) -> dict:
    """`profile`: also report its think-time model (`profile_think_s`) beside the trace's."""
    mains = trace.main_sessions
    turns = [t for s in trace.sessions for t in s.turns]
    per_req = list(_cache_hits(trace, block_size, cache_tokens))
    prompts = np.array([r[0] for r in per_req], dtype=float)
    kids = [len(trace.children.get(s.id, [])) for s in mains]
    with_kids = [n for n in kids if n > 0]
    total_prompt = float(prompts.sum())
    stats = {
        "sessions": len(trace.sessions),
        "main_sessions": len(mains),
        "subagent_sessions": len(trace.sessions) - len(mains),
        "requests": len(per_req),
        "block_size": block_size,
        "turns_per_main_session": dist([len(s.turns) for s in mains]),
        "turns_per_subagent": dist([len(s.turns) for s in trace.sessions if s.parent is not None]),
        "prompt_tokens": dist(prompts),
        "output_tokens": dist([t.output_tokens for t in turns]),
        "new_input_tokens": dist([t.new_input_tokens for t in turns]),
        "think_s": dist([t.think_s for s in trace.sessions for t in s.turns[1:]]),
        "subagents_per_main_session": dist(kids),
        "main_sessions_with_subagents": len(with_kids) / len(mains) if mains else 0.0,
        "subagents_per_parent": float(np.mean(with_kids)) if with_kids else 0.0,
        "ideal_cache_hit": sum(r[1] for r in per_req) / total_prompt if total_prompt else 0.0,
        "by_agent": by_agent(per_req, cache_tokens is not None),
    }
    if cache_tokens is not None:
        stats["cache_tokens"] = cache_tokens
        stats["lru_cache_hit"] = (
            # every request has an LRU hit when cache_tokens is set
            sum(r[2] for r in per_req if r[2] is not None) / total_prompt if total_prompt else 0.0
        )
    stats["corpus_think_s"] = dict(CORPUS_THINK_S)
    if profile is not None:
        stats["profile"] = profile.name
        stats["profile_think_s"] = dist(think_samples(profile))
    stats["fidelity"] = fidelity(stats, scale=float(trace.header.meta.get("scale", 1.0) or 1.0))
    return stats


def fidelity(stats: dict, *, scale: float = 1.0, targets=AGENTX_TARGETS) -> list[dict]:
    rows = []
    for t in targets:
        got = stats[t.key]
        value = got["p90" if t.kind == "p90" else "p50"] if isinstance(got, dict) else got
        want = t.value * scale if t.tokens else t.value
        if value is None:
            met = False
        elif t.kind == "above":
            met = value > want
        else:
            met = abs(value - want) <= t.tolerance * want
        rule = f"> {want:g}" if t.kind == "above" else f"{want:g} ± {t.tolerance:.0%}"
        rows.append({"property": t.label, "key": t.key, "target": rule, "value": value, "met": met})
    return rows
