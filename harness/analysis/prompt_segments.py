"""Prefix-cache hits by prompt segment: which part of each prompt the server's cache held.

Each request's prompt is rebuilt from the run's trace as labelled segments
(`trace.segments.Layout.labelled`: system, inherited, history, reports, tool_result, new_input).
A prefix cache hits a prompt from its start, so of a request that hit `cached` tokens (ideal:
`cached_tokens_ideal`) a segment starting at token `a` of length `n` hit `clip(cached - a, 0, n)`.
Positions are the trace's tokens; where the server counted the prompt differently (a chat
template's role markers, tool schemas) they are scaled per request to its `prompt_tokens`, so the
split is then approximate (`positions: "scaled"`), as the ideal itself is without a tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.trace.content import Content
from harness.trace.cycles import cycle_salt, split_cycled_id
from harness.trace.model import Trace
from harness.trace.segments import SEGMENT_KINDS


@dataclass(frozen=True)
class SegmentSpans:
    """Every labelled segment of every request, flattened (one row per segment run)."""

    row: np.ndarray  # position of its request in the frame the spans were built for
    kind: np.ndarray  # index into SEGMENT_KINDS
    start: np.ndarray  # first token, in the server's count of the prompt
    length: np.ndarray  # tokens, in the server's count
    scaled: bool  # some request's positions were scaled to the server's prompt length


def segment_spans(trace: Trace, ok: pd.DataFrame, salt: str | None) -> SegmentSpans:
    """The segments of each ok request's prompt, in the server's token positions."""
    # A prompt's runs depend on the salt only through whether it has one (the salt segment's
    # length is fixed), so every cycle of a cycled trace shares them: labelled once per turn.
    contents: dict[bool, Content] = {}
    memo: dict[tuple[str, int, bool], list[tuple[int, int]]] = {}
    rows, kinds, lengths = [], [], []
    server = ok["prompt_tokens"].to_numpy(dtype=float)
    turns = ok["turn"].to_numpy(dtype=float).astype(int).tolist()
    scaled = False
    for i, (sid, k) in enumerate(zip(ok["session_id"].tolist(), turns, strict=True)):
        tid, cycle = split_cycled_id(sid)
        cycle_salted = cycle_salt(salt, cycle)
        key = (tid, k, bool(cycle_salted))
        runs = memo.get(key)
        if runs is None:
            content = contents.get(key[2])
            if content is None:
                content = contents[key[2]] = Content(trace, salt=cycle_salted, cache_size=16)
            runs = memo[key] = _runs(content.labelled(tid, k))
        total = sum(n for _, n in runs)
        factor = server[i] / total if total and server[i] == server[i] else 1.0
        scaled |= factor != 1.0
        for kind, n in runs:
            rows.append(i)
            kinds.append(kind)
            lengths.append(n * factor)
    row = np.asarray(rows, dtype=np.int64)
    length = np.asarray(lengths, dtype=float)
    return SegmentSpans(
        row, np.asarray(kinds, dtype=np.int64), _starts(row, length), length, scaled
    )


def _runs(labelled) -> list[tuple[int, int]]:
    """Consecutive segments of one kind merged: (kind index, tokens)."""
    out: list[list[int]] = []
    for name, seg in labelled:
        kind = SEGMENT_KINDS.index(name)
        if out and out[-1][0] == kind:
            out[-1][1] += seg.length
        elif seg.length:
            out.append([kind, seg.length])
    return [(k, n) for k, n in out]


def _starts(row: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Each span's first token: the lengths before it within its request."""
    ends = np.cumsum(length)
    first = np.r_[True, row[1:] != row[:-1]] if len(row) else np.zeros(0, dtype=bool)
    offset = np.maximum.accumulate(np.where(first, ends - length, 0.0)) if len(row) else ends
    return ends - length - offset


def span_hits(spans: SegmentSpans, tokens: np.ndarray) -> np.ndarray:
    """Per span, the tokens of it a prefix hit of `tokens[row]` covers."""
    return np.clip(np.nan_to_num(tokens[spans.row]) - spans.start, 0.0, spans.length)


def by_segment(spans: SegmentSpans, misses: pd.DataFrame, group: np.ndarray | None = None) -> dict:
    """summary.json `cache.by_segment` (or, per `group` code, one such table per group):
    each segment kind's prompt tokens and its server hit rate beside the ideal, over the
    requests whose server reported cached tokens."""
    reported = misses["reported"].to_numpy()[spans.row]
    cached = span_hits(spans, misses["cached"].to_numpy(dtype=float))
    ideal = span_hits(spans, misses["ideal"].to_numpy(dtype=float))
    frame = pd.DataFrame(
        {
            "kind": spans.kind,
            "group": 0 if group is None else group[spans.row],
            "row": spans.row,
            "prompt": spans.length,
            "rep_prompt": np.where(reported, spans.length, 0.0),
            "cached": np.where(reported, cached, 0.0),
            "ideal": np.where(reported, ideal, 0.0),
        }
    )
    out: dict = {}
    for (g, kind), t in frame.groupby(["group", "kind"], sort=True):
        out.setdefault(g, {})[SEGMENT_KINDS[kind]] = _row(t)
    return out if group is not None else out.get(0, {})


def _row(t: pd.DataFrame) -> dict:
    rep = float(t["rep_prompt"].sum())
    return {
        "requests": int(t["row"].nunique()),
        "prompt_tokens": float(t["prompt"].sum()),
        "cached_tokens": float(t["cached"].sum()),
        "ideal_tokens": float(t["ideal"].sum()),
        "hit_rate": float(t["cached"].sum()) / rep if rep > 0 else None,
        "ideal_hit_rate": float(t["ideal"].sum()) / rep if rep > 0 else None,
    }


def segment_info(spans: SegmentSpans | None, why_not: str | None = None) -> dict:
    """How the split was made (summary.json `cache.segments`)."""
    if spans is None:
        return {"kinds": list(SEGMENT_KINDS), "positions": None, "note": why_not}
    if spans.scaled:
        note = (
            "the server counted prompts differently from the trace (chat template, tool schemas):"
            " segment positions scaled per request to its prompt_tokens; compare rates"
        )
        return {"kinds": list(SEGMENT_KINDS), "positions": "scaled", "note": note}
    return {"kinds": list(SEGMENT_KINDS), "positions": "exact", "note": None}
