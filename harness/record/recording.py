"""A recording folder's trace.jsonl and recording.json, rebuilt from its log (requests.jsonl).

The trace holds the requests that got a whole answer (status 200, read to its end), grouped
into sessions by `record.sessions`; every turn carries its recorded prompt
(`trace.recorded`), its output tokens (the upstream's usage, else counted), and its think time:
from the previous turn's end (and, after a join, from its subagents' last end) to its send; a
subagent's first turn from the end of the parent's turn it started after. A main session
arrives when its first request was sent (the recording's first send is 0). A turn's `new_input_tokens` is what its prompt adds to the
previous turn's beyond that turn's output (the generated traces' model), so a profile fitted
to the trace grows prompts as the recording did. recording.json says
what was recorded and what was kept (docs/record.md).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness import __version__
from harness.atomic import replacing
from harness.record import log
from harness.record.sessions import SPAWN_WINDOW_S, Captured, Plan, reconstruct
from harness.trace.model import Session, Trace, TraceHeader, Turn
from harness.trace.native import write_trace
from harness.trace.prefix import IdealPrefixCache
from harness.trace.recorded import RecordedPrompt, pieces
from harness.trace.segments import Segment

TRACE_FILE, SUMMARY_FILE = "trace.jsonl", "recording.json"
RECORDING_FORMAT = "agentic-harness-recording"
BLOCK_SIZE = 16  # the trace's cache-granularity hint (as generated traces have)


@dataclass
class Settings:
    """How the recording was made (recording.json), set by `harness record`."""

    upstream: str  # redacted: no user info, no query
    listen: str = ""
    tokenizer: str = "pieces"
    block_tokens: int = 64
    keep_content: bool = False
    salt_fingerprint: str = ""
    spawn_window_s: float = SPAWN_WINDOW_S
    write_every_s: float = 30.0
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


def rebuild(folder: Path, settings: Settings | None = None, *, final: bool = False) -> Trace:
    """Write trace.jsonl and recording.json (each whole or not at all) from the log."""
    entries = log.read(folder)
    settings = settings or _settings_of(folder)
    trace, plans, ok = build(entries, settings)
    write_trace(trace, folder / TRACE_FILE)
    summary = describe(entries, settings, trace, plans, ok, final=final)
    with replacing(folder / SUMMARY_FILE) as tmp:
        tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return trace


def _settings_of(folder: Path) -> Settings:
    """The settings an earlier write recorded (`harness record --rebuild`)."""
    path = folder / SUMMARY_FILE
    if not path.exists():
        return Settings(upstream="unknown")
    doc = json.loads(path.read_text(encoding="utf-8"))
    s = doc.get("settings", {})
    known = {k: s[k] for k in Settings.__dataclass_fields__ if k in s}
    return Settings(**{"upstream": doc.get("upstream", "unknown"), **known})


# ---- the trace --------------------------------------------------------------------------------


def build(entries: log.Entries, settings: Settings) -> tuple[Trace, list[Plan], list[int]]:
    """The trace of the requests answered whole; also the sessions and those requests' ids."""
    ok = [
        rid
        for rid in sorted(entries.requests)
        if rid in entries.prompts and rid in entries.done and entries.done[rid].outcome == "ok"
    ]
    called = _called_tools(entries)
    captured = [_captured(entries, rid, rid in called) for rid in ok]
    plans = reconstruct(captured, settings.spawn_window_s)
    names = _names(plans)
    t0 = min((c.t_sent for c in captured), default=0.0)
    builder = _Builder(entries, ok, captured, plans, names, t0)
    sessions = [builder.session(p) for p in plans]
    meta = {
        "recording": {
            "source": "harness record",
            "tokenizer": settings.tokenizer,
            "block_tokens": settings.block_tokens,
            "content": "kept" if settings.keep_content else "stand-ins",
        },
        "generator": f"agentic-harness {__version__}",
    }
    header = TraceHeader(seed=0, profile="recording", block_size=BLOCK_SIZE, meta=meta)
    return Trace(header, tuple(sessions)), plans, ok


def _captured(entries: log.Entries, rid: int, called: bool) -> Captured:
    req, done = entries.requests[rid], entries.done[rid]
    calls = max(done.calls, int(called))
    return Captured(
        req.t_sent,
        done.t_end,
        tuple(req.context),
        req.system,
        req.headers,
        calls,
        frozenset(req.replies),
    )


def _called_tools(entries: log.Entries) -> set[int]:
    """Requests whose reply called tools by the agent's own account: a later request sends
    their whole prompt back, then an assistant message with tool calls (what the agent made of
    the reply; a server may not parse calls out of its reply, the agent did)."""
    out: set[int] = set()
    for rid, req in entries.requests.items():
        prompt, base = entries.prompts.get(rid), (req.prompt or {}).get("base")
        before = entries.prompts.get(base) if isinstance(base, int) else None
        if prompt is None or before is None or not isinstance(base, int):
            continue
        keep = len(before.messages)
        if len(prompt.messages) > keep and prompt.messages[:keep] == before.messages:
            nxt = prompt.messages[keep]
            if nxt.role == "assistant" and nxt.calls:
                out.add(base)
    return out


def _names(plans: list[Plan]) -> dict[int, str]:
    """Main sessions r0001, r0002, ... in order of their first request; subagents
    <parent>.a1, .a2, ... in order of theirs."""
    names: dict[int, str] = {}
    mains = [p for p in plans if p.parent is None]
    for n, p in enumerate(sorted(mains, key=lambda q: q.requests[0]), start=1):
        names[id(p)] = f"r{n:04d}"
    for p in plans:  # parents come before their subagents
        kids = sorted((q for q in plans if q.parent is p), key=lambda q: q.requests[0])
        for n, q in enumerate(kids, start=1):
            names[id(q)] = f"{names[id(p)]}.a{n}"
    return names


class _Builder:
    def __init__(self, entries, ok, captured, plans, names, t0) -> None:
        self.entries, self.ok, self.captured = entries, ok, captured
        self.plans, self.names, self.t0 = plans, names, t0
        self.arrival: dict[int, float] = {}

    def session(self, p: Plan) -> Session:
        first = self.captured[p.requests[0]]
        parent = p.parent
        arrival = self.arrival[id(parent)] if parent is not None else first.t_sent - self.t0
        self.arrival[id(p)] = arrival
        prompts = [self.entries.prompts[self.ok[i]] for i in p.requests]
        system = _system_tokens(prompts[0], first.system)
        turns = tuple(self._turn(p, k, prompts, system) for k in range(len(p.requests)))
        return Session(
            id=self.names[id(p)],
            arrival_s=round(max(0.0, arrival), 6),
            system_tokens=system,
            system_id="sys-" + _digest(first.context[: first.system]),
            turns=turns,
            parent=self.names[id(parent)] if parent is not None else None,
            fork_turn=p.fork_turn if p.mode == "fork" else None,
            mode=p.mode,  # type: ignore[arg-type]  # "fork", "spawn" or None
        )

    def _turn(self, p: Plan, k: int, prompts: list[RecordedPrompt], system: int) -> Turn:
        i = p.requests[k]
        kids = [q for q in self.plans if q.parent is p and q.after == k]
        return Turn(
            new_input_tokens=self._new_input(p, k, prompts, system),
            output_tokens=self.entries.done[self.ok[i]].output_tokens,
            think_s=round(self._think(p, k), 3),
            spawns=tuple(self.names[id(q)] for q in sorted(kids, key=lambda q: q.requests[0])),
            prompt=prompts[k],
        )

    def _new_input(self, p: Plan, k: int, prompts: list[RecordedPrompt], system: int) -> int:
        """What a turn adds to the previous turn's prompt beyond that turn's output (as the
        generated trace's model has it: prompt k = prompt k-1 + output k-1 + new input k)."""
        if k == 0 and p.mode == "fork" and p.parent is not None and p.fork_turn is not None:
            rid = self.ok[p.parent.requests[p.fork_turn]]  # what it inherits: that turn's
            inherited, previous = self.entries.prompts[rid], self.entries.done[rid].output_tokens
            return max(0, _added(inherited, prompts[0]) - previous)
        if k == 0:
            return max(0, prompts[0].tokens - system)
        previous = self.entries.done[self.ok[p.requests[k - 1]]].output_tokens
        return max(0, _added(prompts[k - 1], prompts[k]) - previous)

    def _think(self, p: Plan, k: int) -> float:
        c = self.captured[p.requests[k]]
        if k == 0:
            if p.parent is None or p.after is None:
                return 0.0
            return max(0.0, c.t_sent - self.captured[p.parent.requests[p.after]].t_end)
        ends = [self.captured[p.requests[k - 1]].t_end]
        ends += [
            self.captured[q.requests[-1]].t_end
            for q in self.plans
            if q.parent is p and q.after == k - 1
        ]
        return max(0.0, c.t_sent - max(ends))


def _system_tokens(prompt: RecordedPrompt, system_part: int) -> int:
    """Tokens of the tools and the leading system messages (`system_part` - 1 of them)."""
    tools = sum(t.tokens for t in prompt.tools)
    msgs = prompt.messages[: max(0, system_part - 1)]
    return tools + sum(
        sum(part.tokens for part in m.parts) + sum(c.args.tokens for c in m.calls) for m in msgs
    )


def _added(before: RecordedPrompt, now: RecordedPrompt) -> int:
    """Tokens of `now` past the prefix it shares with `before` (by segments)."""
    old, new = [Segment(*x) for x in pieces(before)], [Segment(*x) for x in pieces(now)]
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    return sum(s.length for s in new[same:])


def _digest(keys) -> str:
    return hashlib.blake2b("\x00".join(keys).encode(), digest_size=6).hexdigest()


# ---- recording.json ---------------------------------------------------------------------------


def prefix_reuse(entries: log.Entries, ok: list[int], block_size: int) -> float | None:
    """Σ shared prefix / Σ prompt tokens over the answered requests in the order they were sent:
    each prompt's longest prefix any earlier one had (an infinite cache at `block_size`)."""
    cache, hit, total = IdealPrefixCache(block_size), 0, 0
    for rid in sorted(ok, key=lambda r: (entries.requests[r].t_sent, r)):
        segs = [Segment(*x) for x in pieces(entries.prompts[rid])]
        hit += cache.observe(segs)
        total += sum(s.length for s in segs)
    return hit / total if total else None


def describe(entries, settings: Settings, trace: Trace, plans, ok, *, final: bool) -> dict:
    done = entries.done
    outcomes = Counter(d.outcome for d in done.values())
    reported = [done[r].tokens.get("prompt_tokens") for r in ok]
    return {
        "format": RECORDING_FORMAT,
        "version": 1,
        "harness_version": __version__,
        "upstream": settings.upstream,
        "listen": settings.listen,
        "started_at": settings.started_at,
        "written_at": datetime.now(UTC).isoformat(),
        "complete": final,
        "apis": dict(Counter(r.api for r in entries.requests.values())),
        "requests": {
            "captured": len(entries.requests),
            "in_trace": len(ok),
            **{k: outcomes.get(k, 0) for k in ("ok", "http_error", "failed", "cancelled")},
            "unfinished": len(set(entries.requests) - set(done)),
            "unreadable": sum(r.unreadable is not None for r in entries.requests.values()),
        },
        "sessions": _session_counts(trace, plans),
        "tokens": {
            "prompt": sum(entries.requests[r].prompt_tokens for r in ok),
            "prompt_reported": sum(n for n in reported if n is not None),
            "prompt_reported_requests": sum(n is not None for n in reported),
            "output": sum(done[r].output_tokens for r in ok),
            "output_counted_requests": sum(done[r].output_counted for r in ok),
            "cached_reported": sum(done[r].tokens.get("cached_tokens") or 0 for r in ok),
        },
        "prefix_reuse": {
            "tokens": prefix_reuse(entries, ok, 1),
            f"block_{BLOCK_SIZE}": prefix_reuse(entries, ok, BLOCK_SIZE),
        },
        "kept": {
            "content": settings.keep_content,
            "roles": True,
            "tool_names": True,
            "tool_call_ids": True,
            "json_keys": True,
            "schema_words": True,
            "session_headers": True,
        },
        "dropped_parts": dict(
            sum((Counter(r.dropped) for r in entries.requests.values()), Counter())
        ),
        "session_headers_seen": sorted({h for r in entries.requests.values() for h in r.headers}),
        "turns": {  # each session's turns as request ids (requests.jsonl's `id`)
            s.id: [ok[i] for i in p.requests] for s, p in zip(trace.sessions, plans, strict=True)
        },
        "settings": {
            k: getattr(settings, k)
            for k in (
                "tokenizer",
                "block_tokens",
                "keep_content",
                "salt_fingerprint",
                "spawn_window_s",
                "write_every_s",
                "listen",
                "started_at",
            )
        },
    }


def _session_counts(trace: Trace, plans: list[Plan]) -> dict:
    subs = [s for s in trace.sessions if s.parent is not None]
    return {
        "main": len(trace.sessions) - len(subs),
        "subagents": len(subs),
        "forks": sum(s.mode == "fork" for s in subs),
        "spawns": sum(s.mode == "spawn" for s in subs),
        "by_rule": dict(Counter(p.rule for p in plans)),
    }
