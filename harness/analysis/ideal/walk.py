"""The ideal prefix cache of a run, from its trace and its records in send order.

`cached_tokens_ideal` is what an infinite prefix cache on one server would have hit: the longest
prefix a request's prompt shares with any prompt sent before it in this run, floored to whole
blocks and capped so that one prompt token is computed (`trace.prefix.block_hit`). The driver
only sends and records; the analyzer rebuilds each prompt's segments from the run's trace and
walks them in send order (`t_sent`, ties by file order), so the value means the same for a local
and a distributed run, and can be recomputed at any block size (`harness analyze --block-size`).

The walk keeps the shared lengths unfloored, so any block size is one vectorized floor away, and
walks a second trie in which a prompt enters only once its request computed it (had its first
token, or ended ok): the prefix shared with requests that had *finished* prefill when this one was
sent. The difference between the two is the prefix that was still being computed elsewhere (in
flight). A third set of tries, one per endpoint (`analysis.ideal.established`), holds what each
endpoint computed, and what of it a server that never keeps a whole-block prompt's last block
keeps: the evidence `analysis.cache` names evicted tokens by.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from harness.analysis.ideal import granularity
from harness.analysis.ideal.established import HeldPrefixes
from harness.analysis.ideal.server_tokens import (
    WALK_COLUMNS,
    ServerTokenWalk,
    scale_to_server,
    token_space,
)
from harness.analysis.records import warn
from harness.trace.content import Content
from harness.trace.cycles import cycle_salt, split_cycled_id
from harness.trace.model import Trace
from harness.trace.prefix import IdealPrefixCache

if TYPE_CHECKING:
    from harness.analysis.loader import Run


@dataclass
class SharedPrefixes:
    """Per record (aligned to the records frame): prompt length in trace tokens, tokens shared
    with any earlier-sent prompt, with earlier prompts whose prefill had finished, with those
    computed on the record's own endpoint (`held`), and with what of them a server that drops a
    whole-block prompt's last block keeps (`kept`; = held without a block size)."""

    prompt: np.ndarray
    shared: np.ndarray
    shared_ready: np.ndarray
    held: np.ndarray
    kept: np.ndarray


def block_hits(shared: np.ndarray, prompt: np.ndarray, block_size: int) -> np.ndarray:
    """`trace.prefix.block_hit`, vectorized (NaN stays NaN)."""
    usable = np.minimum(shared, prompt - 1)
    return np.maximum(0, np.floor_divide(usable, block_size) * block_size)


def trace_mismatch(trace: Trace, records: pd.DataFrame) -> str | None:
    """Why the trace cannot have produced these records (first offending request), or None."""
    turns = records["turn"].to_numpy(dtype=float)
    for i, sid in enumerate(records["session_id"].tolist()):
        s = trace.by_id.get(split_cycled_id(sid)[0])  # a later cycle's session is its trace session
        if s is None:
            return f"session {sid!r} (request {records['request_id'].iloc[i]}) is not in the trace"
        k = turns[i]
        if not (k >= 0 and k.is_integer() and k < len(s.turns)):
            return f"request {records['request_id'].iloc[i]}: turn {k} is not a turn of session {sid!r}"
    return None


def shared_prefixes(
    trace: Trace,
    records: pd.DataFrame,
    *,
    salt: str | None = None,
    walk=None,
    block_size: int | None = None,
) -> SharedPrefixes:
    """Walk every record's prompt in send order (records not sent go last, in file order).
    `walk`: another walk with `send` and `ready` (default: the trace's segments); `block_size`:
    the server's, for what a whole-block prompt keeps (`kept`)."""
    n = len(records)
    t_sent = np.nan_to_num(records["t_sent"].to_numpy(dtype=float), nan=np.inf)
    t_ready = np.maximum(_ready_times(records), np.nextafter(t_sent, np.inf))  # after its own send
    times = np.concatenate([t_sent, t_ready])
    kinds = np.concatenate([np.ones(n, dtype=np.int8), np.zeros(n, dtype=np.int8)])  # ready first
    rows = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((rows, kinds, times))
    walk = walk or _Walk(trace, salt)
    sessions = records["session_id"].tolist()
    turns = records["turn"].to_numpy(dtype=float).astype(int).tolist()
    endpoints = pd.factorize(records["endpoint"].astype(str).to_numpy())[0].tolist()
    drops = _drops(records, block_size).tolist()
    walk.one_endpoint = max(endpoints, default=0) == 0
    out = np.zeros((5, n))
    for e in order.tolist():
        i = rows[e]
        if kinds[e]:
            out[:, i] = walk.send(sessions[i], turns[i], endpoints[i])
        elif np.isfinite(times[e]):
            walk.ready(sessions[i], turns[i], endpoints[i], drops[i])
    return SharedPrefixes(*out)


def _ready_times(records: pd.DataFrame) -> np.ndarray:
    """When a request's prompt was computed by the server for certain: its first token, else its
    end if it ended ok. Never (inf) for a request that was not sent or failed before a token."""
    first = records["t_first_token"].to_numpy(dtype=float)
    done = records["t_done"].to_numpy(dtype=float)
    ok = (records["status"] == "ok").to_numpy()
    ready = np.where(np.isnan(first), np.where(ok, done, np.nan), first)
    ready[np.isnan(records["t_sent"].to_numpy(dtype=float))] = np.nan
    return np.nan_to_num(ready, nan=np.inf)


def _drops(records: pd.DataFrame, block_size: int | None) -> np.ndarray:
    """Per record, the fraction of its prompt a server that keeps no whole-block prompt's last
    block leaves out: block / prompt (the server's count, else the expected one) when the prompt
    is a whole number of blocks, else 0."""
    prompt = records["prompt_tokens"].to_numpy(dtype=float)
    prompt = np.where(np.isnan(prompt), records["prompt_tokens_expected"].to_numpy(float), prompt)
    if block_size is None:
        return np.zeros(len(records))
    whole = (prompt > 0) & (np.nan_to_num(prompt) % block_size == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole, block_size / prompt, 0.0)


class _Walk:
    """Two ideal caches over the same segment keys: prompts as sent, and prompts as ready. Each
    session resumes where its last prompt ended in each, so a turn walks only what it appends.
    A later cycle's session (`<id>@c<n>`, harness.trace.cycles) is its trace session's prompts
    under that cycle's salt."""

    def __init__(self, trace: Trace, salt: str | None) -> None:
        self.trace, self.salt = trace, salt
        self.contents: dict[int, Content] = {}
        self.sent, self.done = IdealPrefixCache(1), IdealPrefixCache(1)
        self.sent_end: dict[str, tuple[int, int, int]] = {}  # session -> (turn, node, tokens)
        self.done_end: dict[str, tuple[int, int, int]] = {}
        self.held: dict[int, HeldPrefixes] = {}  # endpoint -> what it computed
        self.held_end: dict[int, dict[str, tuple[int, int, int]]] = {}
        self.built: dict[str, tuple[int, dict[bool, list | None]]] = {}  # session -> its last turn
        self.one_endpoint = False  # set by shared_prefixes: then `done` is the one `held`

    def send(self, sid: str, k: int, endpoint: int = 0) -> tuple[int, int, int, int, int]:
        """(prompt tokens, shared with sent prompts, with ready prompts, with the endpoint's held
        prompts, with what of them it kept); enters the prompt as sent."""
        segs, node, base = self._continue(self.sent_end, sid, k)
        shared = base + self.sent.shared_prefix(segs, node)
        total = base + sum(s.length for s in segs)
        self.sent_end[sid] = (k, self.sent.insert(segs, node), total)
        held, ends = self._held(endpoint)
        segs, node, base = self._continue(ends, sid, k)
        here, kept = held.shared(segs, node, base)
        if self.one_endpoint:  # what finished anywhere is what finished there
            return total, shared, here, here, kept
        segs, node, base = self._continue(self.done_end, sid, k)
        return total, shared, base + self.done.shared_prefix(segs, node), here, kept

    def ready(self, sid: str, k: int, endpoint: int = 0, drop: float = 0.0) -> None:
        """The prompt was computed on `endpoint`; a server rule drops `drop` of it (a fraction)."""
        held, ends = self._held(endpoint)
        segs, node, base = self._continue(ends, sid, k)
        total = base + sum(s.length for s in segs)
        ends[sid] = (k, held.insert(segs, node, base, total - round(drop * total)), total)
        if not self.one_endpoint:
            segs, node, base = self._continue(self.done_end, sid, k)
            self.done_end[sid] = (k, self.done.insert(segs, node), total)

    def _held(self, endpoint: int) -> tuple[HeldPrefixes, dict[str, tuple[int, int, int]]]:
        if endpoint not in self.held:
            self.held[endpoint], self.held_end[endpoint] = HeldPrefixes(), {}
        return self.held[endpoint], self.held_end[endpoint]

    def _continue(self, ends: dict, sid: str, k: int) -> tuple[list, int, int]:
        """The segments to walk from (node, tokens already walked) for turn k of a session."""
        end = ends.get(sid)
        if end is not None and end[0] == k - 1:
            segs = self._segments(sid, k, True)
            if segs is not None:
                return segs, end[1], end[2]
        return cast(list, self._segments(sid, k, False)), 0, 0

    def _segments(self, sid: str, k: int, appended: bool) -> list | None:
        """Turn k's prompt (`appended`: what it appends to turn k-1's, None if it does not), built
        once for the several tries that walk it: the session's last turn's lists are kept."""
        memo = self.built.get(sid)
        if memo is None or memo[0] != k:
            memo = self.built[sid] = (k, {})
        if appended not in memo[1]:
            tid, cycle = split_cycled_id(sid)
            content = self.contents.get(cycle)
            if content is None:
                content = self.contents[cycle] = Content(
                    self.trace, salt=cycle_salt(self.salt, cycle), cache_size=256
                )
            if not appended:
                memo[1][False] = content.segments(tid, k)
            else:
                extends = content.appends_to_previous(tid, k)
                memo[1][True] = content.new_segments(tid, k) if extends else None
        return memo[1][appended]


# ---- the run's records -------------------------------------------------------------------------


@dataclass(frozen=True)
class Ideal:
    """How a run's `cached_tokens_ideal` was obtained (summary.json `cache.ideal`, `granularity`,
    `token_space`), and what the walk had to warn about."""

    granularity: granularity.Granularity
    source: str | None  # "trace" (recomputed), "records" (as recorded) or None (not available)
    token_space: dict | None = None  # whose tokens the ideal counts (analysis.ideal.server_tokens)
    warnings: tuple[str, ...] = ()
    exact: bool = False  # the shared lengths are known: misses split exactly (analysis.cache)


def with_ideal(
    run: Run, block_size: int | None = None, tokenizer: str | None = None
) -> tuple[pd.DataFrame, Ideal]:
    """A copy of the run's records with `cached_tokens_ideal` filled in, and how it was obtained.
    The copy is shallow: under pandas' copy-on-write a column written here is copied, not shared."""
    records = run.records.copy(deep=False)
    return records, fill_ideal(run, records, block_size, tokenizer)


def fill_ideal(
    run: Run, records: pd.DataFrame, block_size: int | None = None, tokenizer: str | None = None
) -> Ideal:
    """Set `cached_tokens_ideal` of every row of `records` (the analyzer's own copy of the run's
    records), at `block_size` (default: the server's cache granularity, `ideal.granularity`).

    With the run's trace the ideal is recomputed (also over values an older driver wrote) and
    the shared lengths are kept as columns `ideal_shared_tokens` / `ideal_ready_tokens` for the
    miss attribution; without one the recorded values are kept. Chat and text prompts are
    counted in the server's tokens when `tokenizer` (or the run's) allows (ideal.server_tokens)."""
    ok_cached = records["cached_tokens"].to_numpy(dtype=float)[
        (records["status"] == "ok").to_numpy()
    ]
    trace_block = run.trace.header.block_size if run.trace is not None else None
    grain = granularity.decide(ok_cached, run.manifest, trace_block, block_size)
    recorded = Ideal(grain, "records" if records["cached_tokens_ideal"].notna().any() else None)
    if run.trace is None:
        return recorded
    problem = trace_mismatch(run.trace, records)
    if problem is None:
        walked = shared_prefixes(
            run.trace, records, salt=run.replay.salt, block_size=grain.block_size
        )
        problem = _length_mismatch(walked.prompt, records)
    if problem is not None:
        note = f"{run.path}: trace.jsonl does not match the records ({problem}); "
        return replace(recorded, warnings=(_warn(note + "cached_tokens_ideal kept as recorded"),))
    space = token_space(run, records, tokenizer)
    if space.keys is not None:
        walk = ServerTokenWalk(space.keys, _rows(records))
        walked = shared_prefixes(run.trace, records, walk=walk, block_size=grain.block_size)
        records["prompt_tokens_expected"] = walked.prompt
    for column, values in zip(
        WALK_COLUMNS, (walked.shared, walked.shared_ready, walked.held, walked.kept), strict=True
    ):
        records[column] = values
    records["cached_tokens_ideal"] = block_hits(walked.shared, walked.prompt, grain.block_size)
    if space.approximate:
        scale_to_server(records)
    return Ideal(grain, "trace", space.info(), tuple(space.warnings()), exact=True)


def _rows(records: pd.DataFrame) -> dict[tuple[str, int], int]:
    turns = records["turn"].to_numpy(dtype=float).astype(int).tolist()
    return {
        (sid, k): i
        for i, (sid, k) in enumerate(zip(records["session_id"].tolist(), turns, strict=True))
    }


def _length_mismatch(prompt: np.ndarray, records: pd.DataFrame) -> str | None:
    expected = records["prompt_tokens_expected"].to_numpy(dtype=float)
    bad = ~np.isnan(expected) & (expected != prompt)
    if not bad.any():
        return None
    i = int(bad.argmax())
    return (
        f"{int(bad.sum())} prompt lengths differ, first request {records['request_id'].iloc[i]}: "
        f"{expected[i]:.0f} recorded, {prompt[i]:.0f} from the trace"
    )


def _warn(message: str) -> str:
    return warn(message, stacklevel=4)
