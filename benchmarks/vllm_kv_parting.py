"""The cache model's side of benchmarks/vllm_kv_events.py, and the account of a parting.

The run replayed once exactly (`harness.whatif.predict.exact_replay`: the `predicted_self_exact`
row), every block the model hashes or drops logged (`PageMap.listener`) with its free queue at
every step (`Replay.observe`); both sides' events as `Event`s whose content is the model's hash
of the block's token prefix, so vLLM's and the model's blocks match by what they hold. At the
exact replay's first parting: which of that request's blocks each side held when it looked its
prefix up, and for every block one side had dropped, the step that dropped it and the other
side's step that made the same admissions: what each stored and evicted there, in order, and
its free pages.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.whatif_vllm_check import SERVER
from harness.engine.config import FULL
from harness.engine.prefix_lookup import ROOT_HASH, block_hash
from harness.whatif.predict import ExactReplay, exact_replay

BLOCK = 128  # vLLM's CPU build's block (whatif_vllm_check.BLOCK)


@dataclass(frozen=True)
class Event:
    """One block gained ("stored") or lost ("removed") by a side's hash map."""

    t: float  # seconds from the run's start (vLLM: when the step's batch was published)
    step: int  # vLLM: the batch's sequence number; the model: its step
    kind: str
    full: bool  # a full-attention group's block (else a sliding window's)
    group: int
    content: bytes | None  # the model's hash of the block's token prefix (None: not resolved)


# ---- the model's --------------------------------------------------------------------------------


@dataclass
class Step:
    t: float
    free: list[tuple[bytes | None, int]]  # the free queue, head first: (content, group)


@dataclass
class ModelLog:
    """The exact replay's hash-map changes and its free queue at every step's start."""

    events: list[Event] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    kinds: tuple[str, ...] = ()

    def observe(self, k: int, t: float, engine) -> None:
        pool = engine.pool
        if pool.pages.listener is None:
            pool.pages.listener, self.kinds = self._heard, pool.kinds
        free = [(pool.blocks[p].hash, pool.blocks[p].group) for p in pool.free_queue]
        self.steps.append(Step(t, free))

    def _heard(self, kind: str, block) -> None:
        step = len(self.steps) - 1
        full = self.kinds[block.group] == FULL
        self.events.append(Event(self.steps[-1].t, step, kind, full, block.group, block.hash))


def replay_logged(run: Path, pages: int, max_len: int) -> tuple[ExactReplay, ModelLog]:
    log = ModelLog()
    server = {**SERVER, "num_gpu_blocks": pages, "max_model_len": max_len}
    return exact_replay(run, server, "vllm", log.observe), log


# ---- the account --------------------------------------------------------------------------------

Where = dict[
    bytes, tuple[int, list[int]]
]  # content -> (block index, the requests whose prompt holds it)


def where(exact: ExactReplay) -> Where:
    out: Where = {}
    for i, _r in enumerate(exact.requests):
        for b, h in enumerate(chain(exact, i)):
            out.setdefault(h, (b, []))[1].append(i)
    return out


def chain(exact: ExactReplay, i: int) -> list[bytes]:
    """Request i's prompt as the model's block hashes, one per whole block."""
    r = exact.requests[i]
    ids, parent, out = exact.prompts.token_ids(r.session, r.turn), ROOT_HASH, []
    for b in range(len(ids) // BLOCK):
        parent = block_hash(parent, ids[b * BLOCK : (b + 1) * BLOCK].astype("<i4").tobytes())
        out.append(parent)
    return out


def held(events: list[Event], upto: int) -> dict[tuple[bool, bytes | None], int]:
    """Pages of each (kind, content) in the hash map after events[:upto]."""
    count: dict[tuple[bool, bytes | None], int] = defaultdict(int)
    for e in events[:upto]:
        count[(e.full, e.content)] += 1 if e.kind == "stored" else -1
    return count


def admitted(events: list[Event], blocks: list[bytes], cached: int, t_sent: float) -> int | None:
    """Where in `events` the request looked its prefix up: before the evictions its own
    allocation made, which come just before the first block it hashed (at schedule), block
    `cached // BLOCK`; where another request hashed that content too, the one followed by the
    request's next block in the same step."""
    k = cached // BLOCK
    if k >= len(blocks):
        return None
    full = [j for j, e in enumerate(events) if e.full and e.kind == "stored" and e.t >= t_sent - 1]
    found = [j for n, j in enumerate(full) if events[j].content == blocks[k]]
    if not found:
        return None
    nxt = {j: full[n + 1] for n, j in enumerate(full[:-1])}
    ours = [
        j
        for j in found
        if k + 1 < len(blocks)
        and j in nxt
        and events[nxt[j]].content == blocks[k + 1]
        and events[nxt[j]].step == events[j].step
    ]
    j = (ours or found)[0]
    while j and events[j - 1].kind == "removed" and events[j - 1].step == events[j].step:
        j -= 1
    return j


def step_start(events: list[Event], inside: Callable[[Event], bool]) -> int | None:
    """Where the first step with an event `inside` starts: a request that hashed no block (its
    whole prompt but a partial block cached) looked its prefix up somewhere in that step."""
    j = next((j for j, e in enumerate(events) if inside(e)), None)
    while j and events[j - 1].step == events[j].step:
        j -= 1
    return j


@dataclass
class Sides:
    exact: ExactReplay
    model: ModelLog
    vllm: list[Event]
    usage: list[tuple[float, float]]  # (seconds from the run's start, vLLM's KV usage)
    pages: int
    first_tokens: dict[str, float] = field(default_factory=dict)  # measured, by request
    where: Where = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)

    def key(self, e: Event) -> tuple[bool, bytes | None]:
        """What an eviction is compared by: its kind and content, where a prompt holds it (a
        block with generated tokens differs: vLLM's tokens are the model's, the replay's not)."""
        return e.full, e.content if e.content in self.where else None

    def name(self, content: bytes | None, t: float) -> str:
        """The block as 'request#index': the latest request sent by `t` whose prompt holds it."""
        if content is None or content not in self.where:
            return "?"
        b, reqs = self.where[content]
        sent = [i for i in reqs if self.exact.requests[i].t_sent <= t] or reqs
        r = self.exact.requests[max(sent, key=lambda i: self.exact.requests[i].t_sent)]
        return f"{r.session}:{r.turn}#{b}"


def account(s: Sides) -> list[str]:
    first = s.exact.parting["first_parting"]
    s.where = where(s.exact)
    if first is None:  # how far the two agree, still
        return ["every request cached what vLLM cached", *agreement(s)]
    s.sent = {f"{r.session}:{r.turn}": r.t_sent for r in s.exact.requests}
    i = list(s.sent).index(first["request"])
    blocks, t_sent = chain(s.exact, i), s.exact.requests[i].t_sent
    v_at = admitted(s.vllm, blocks, first["measured_cached"], t_sent)
    m_at = admitted(s.model.events, blocks, first["replayed_cached"], t_sent)
    if v_at is None and first["request"] in s.first_tokens:  # hashed nothing: its step's start
        v_at = step_start(s.vllm, lambda e: e.t >= s.first_tokens[first["request"]] - 0.01)
    if m_at is None and s.exact.outcomes[i].first_token is not None:
        last = max(
            k for k, st in enumerate(s.model.steps) if st.t < s.exact.outcomes[i].first_token
        )
        m_at = step_start(s.model.events, lambda e: e.step >= last)
    if v_at is None or m_at is None:
        return [s.exact.parting["words"], "  (its admission was not found in both logs)"]
    v_held, m_held = held(s.vllm, v_at), held(s.model.events, m_at)
    lines = [s.exact.parting["words"], *agreement(s), hashed(v_held, m_held)]
    lines.append(
        f"  its blocks held when it looked them up (vLLM batch {s.vllm[v_at].step}, "
        f"model step {s.model.events[m_at].step}):"
    )
    table, lost = held_table(blocks, v_held, m_held)
    return lines + table + dropped(s, lost, v_at, m_at)


def held_table(
    blocks: list[bytes], v_held: dict, m_held: dict
) -> tuple[list[str], list[tuple[bool, bytes]]]:
    """Each block of the request's prompt: the pages of it each side held, by kind; and the
    (kind, block)s the two held differently."""
    lines, lost = [], []
    for b, h in enumerate(blocks):
        (vf, mf), (vs, ms) = [(v_held.get((f, h), 0), m_held.get((f, h), 0)) for f in (True, False)]
        lines.append(f"    block {b}: full vLLM {vf} model {mf}; sliding vLLM {vs} model {ms}")
        lost += [(f, h) for f, v, m in ((True, vf, mf), (False, vs, ms)) if v != m]
    return lines, lost


def agreement(s: Sides) -> list[str]:
    """How far the two sides agree: the blocks vLLM hashed that the model hashed too (by
    content), and the evictions made in the same order (where they first differ, both steps)."""
    v_stored = [e for e in s.vllm if e.kind == "stored"]
    ours = {(e.full, e.content) for e in s.model.events if e.kind == "stored"}
    known = sum(e.content is not None for e in v_stored)
    both = sum((e.full, e.content) in ours for e in v_stored)
    v_out = [e for e in s.vllm if e.kind == "removed"]
    m_out = [e for e in s.model.events if e.kind == "removed"]
    pairs = list(zip(v_out, m_out, strict=False))
    n = next((k for k, (v, m) in enumerate(pairs) if s.key(v) != s.key(m)), len(pairs))
    lines = [
        f"  vLLM hashed {len(v_stored)} blocks, {known} matched by content, {both} of them "
        "hashed by the model too",
        f"  evictions: vLLM {len(v_out)}, model {len(m_out)}; the first {n} the same, in order",
    ]
    return lines + (first_difference(s, *pairs[n], n) if n < len(pairs) else [])


def first_difference(s: Sides, v: Event, m: Event, n: int) -> list[str]:
    lines = [
        f"    the {n + 1}th: vLLM {_kind(v)} {s.name(v.content, v.t)} (batch {v.step}, "
        f"{v.t:.2f} s), model {_kind(m)} {s.name(m.content, m.t)} (step {m.step}, {m.t:.2f} s):"
    ]
    lost = [(v.full, v.content), (m.full, m.content)]
    lines += step_lines(s, "vLLM", s.vllm, v.step, lost)
    return lines + step_lines(s, "model", s.model.events, m.step, lost)


def hashed(v_held: dict, m_held: dict) -> str:
    """The two hash maps when the request looked its prefix up."""
    v_only = sum(1 for k, c in v_held.items() if c > 0 and m_held.get(k, 0) <= 0)
    m_only = sum(1 for k, c in m_held.items() if c > 0 and v_held.get(k, 0) <= 0)
    pages = (sum(c for c in v_held.values() if c > 0), sum(c for c in m_held.values() if c > 0))
    return (
        f"  hashed pages then: vLLM {pages[0]}, model {pages[1]}; contents only vLLM held "
        f"{v_only}, only the model {m_only}"
    )


def _kind(e: Event) -> str:
    return "full" if e.full else "sliding"


def dropped(s: Sides, lost: list[tuple[bool, bytes]], v_at: int, m_at: int) -> list[str]:
    """For each side, the steps before the admission that last dropped each block the two held
    differently, once each, with the other side's step that made the same admissions."""
    out = []
    for side, events, before in (("vLLM", s.vllm, v_at), ("model", s.model.events, m_at)):
        steps: dict[int, list[str]] = defaultdict(list)
        kept = []
        for full, h in lost:
            label = f"{_kind_of(full)} #{s.where[h][0]}"
            gone = [
                e
                for e in events[:before]
                if e.kind == "removed" and (e.full, e.content) == (full, h)
            ]
            (steps[gone[-1].step] if gone else kept).append(label)
        if kept:
            out.append(f"  {side} never evicted: {', '.join(kept)}")
        for step, labels in steps.items():
            out.append(f"  {side} last evicted {', '.join(labels)} in:")
            out += step_lines(s, side, events, step, lost)
            other = counterpart(s, side, events, step)
            if other is not None:
                out.append(f"    the same admissions on {other[0]}:")
                out += step_lines(s, *other, lost)
    return out


def _kind_of(full: bool) -> str:
    return "full" if full else "sliding"


def counterpart(
    s: Sides, side: str, events: list[Event], step: int
) -> tuple[str, list[Event], int] | None:
    """The other side's step that admitted the request this step admitted first."""
    mine = [e for e in events if e.step == step]
    names = [_who(s, st, mine[0].t) for _, st in parts(s, mine) if st]
    if not names:
        return None
    other = ("model", s.model.events) if side == "vLLM" else ("vLLM", s.vllm)
    steps: dict[int, list[Event]] = defaultdict(list)
    for e in other[1]:
        steps[e.step].append(e)
    for n, evs in steps.items():
        if any(_who(s, st, evs[0].t) == names[0] for _, st in parts(s, evs) if st):
            return other[0], other[1], n
    return None


def step_lines(
    s: Sides, side: str, events: list[Event], step: int, lost: list[tuple[bool, bytes]]
) -> list[str]:
    mine = [e for e in events if e.step == step]
    t = mine[0].t if mine else 0.0
    lines = [f"    {side} {_when(side, step, t)}: {free_pages(s, side, step, t, lost)}"]
    for n, (removed, stored) in enumerate(parts(s, mine), 1):
        lines.append(
            f"      {n}. evicted {len(removed)}: {'; '.join(condensed(s, removed, t)) or '-'}"
            f" | then hashed {_admission(s, stored, t) if stored else '-'}"
        )
    return lines


def _when(side: str, step: int, t: float) -> str:
    """vLLM publishes a step's batch as it ends; the model is watched as a step starts."""
    return (
        f"batch {step} (published {t:.2f} s)" if side == "vLLM" else f"step {step} (from {t:.2f} s)"
    )


def free_pages(s: Sides, side: str, step: int, t: float, lost: list[tuple[bool, bytes]]) -> str:
    """The model's free queue at the step's start (and where the first block in `lost` stood
    in it); vLLM's free pages from its KV usage sampled before the step."""
    if side == "model":
        free = s.model.steps[step].free
        mine = {h for _, h in lost}
        at = next((k for k, (c, _) in enumerate(free) if c in mine), None)
        unhashed = sum(1 for c, _ in free if c is None)
        out = f"{len(free)} free pages at its start, {unhashed} unhashed"
        if at is not None:
            ahead = sum(1 for c, _ in free[:at] if c is None)
            out += f"; the first of those blocks {at} from the head ({ahead} unhashed ahead)"
        return out
    before = [u for tu, u in s.usage if tu <= t]
    if not before:
        return "free pages not sampled"
    return f"~{round((1 - before[-1]) * (s.pages - 1))} free pages (KV usage sampled before it)"


def condensed(s: Sides, events: list[Event], t: float) -> list[str]:
    """A step's removals as runs of one request's blocks of one kind: 's000003:20 full #6-0'."""
    runs: list[list] = []
    for e in events:
        req, _, b = s.name(e.content, t).partition("#")
        if runs and runs[-1][0] == (req, e.full):
            runs[-1][1].append(b or "?")
            runs[-1][2].add(e.group)
        else:
            runs.append([(req, e.full), [b or "?"], {e.group}])
    return [
        f"{req} {'full' if full else f'sliding x{len(groups)}'} #{_span(bs)}"
        for (req, full), bs, groups in runs
    ]


def parts(s: Sides, events: list[Event]) -> list[tuple[list[Event], list[Event]]]:
    """A step's events as (evictions, hashed blocks) per allocation, in order: vLLM looks a
    request up, allocates (evicting), then hashes. A request hashes each group's blocks in order,
    so a block no deeper than its group's last starts the next request."""
    out: list[tuple[list[Event], list[Event]]] = []
    last: dict[int, int] = {}
    for e in events:
        b = s.where[e.content][0] if e.content in s.where else None
        after_stores = bool(out and out[-1][1])
        deeper = b is None or last.get(e.group, -1) < b
        if not out or (after_stores and (e.kind == "removed" or not deeper)):
            out.append(([], []))
            last = {}
        out[-1][0 if e.kind == "removed" else 1].append(e)
        if b is not None and e.kind == "stored":
            last[e.group] = b
    return out


def _who(s: Sides, part: list[Event], t: float) -> str:
    """The request an admission's hashed blocks belong to: its deepest full block's."""
    full = [e for e in part if e.full and e.content in s.where]
    deepest = max(full, key=lambda e: s.where[e.content][0], default=part[-1])
    return s.name(deepest.content, t).partition("#")[0]


def _admission(s: Sides, part: list[Event], t: float) -> str:
    full = [e for e in part if e.full and e.content in s.where]
    blocks = [str(s.where[e.content][0]) for e in full]
    req = _who(s, part, t)
    if req in s.sent:
        req += f" (sent {s.sent[req]:.2f} s)"
    return f"{req} full #{_span(blocks) if blocks else '-'} + {len(part) - len(full)} sliding"


def _span(blocks: list[str]) -> str:
    seen = list(dict.fromkeys(blocks))
    ints = [int(b) for b in seen if b.isdigit()]
    if len(ints) == len(seen) and ints == list(range(ints[0], ints[0] + len(ints))):
        return seen[0] if len(seen) == 1 else f"{seen[0]}-{seen[-1]}"
    return ",".join(seen)
