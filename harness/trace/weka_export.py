"""Export to the Weka / AgentX format (`harness trace convert --to weka`), the one AIPerf and
InferenceX replay.

One trace object per main session, its subagents nested as `type: "subagent"` entries right
after the request that spawns them (consecutive entries run in parallel; the parent's next
request joins them). Each request is `{t, type: "n", model, in, out, hash_ids, think_time}`:
`t` the estimated send time (`timeline.send_order`: the session's arrival plus think times, on
one clock for the whole trace, so arrivals survive a round trip), `hash_ids` the prompt's
64-token blocks (chained hashes of our content, as `BlockHasher`; a block-mode trace already in
64-token blocks keeps its own ids).

`hash_id_scope: "local"` (the default, the only scope AIPerf's loader takes) numbers each trace's
blocks on their own, so what traces share (the system prompts) is not visible across traces;
`"global"` numbers all traces' blocks in one namespace and keeps that sharing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from harness.atomic import replacing
from harness.errors import TraceFormatError
from harness.trace.blocks import LOCAL_MASK, BlockHasher
from harness.trace.content import Content
from harness.trace.model import Session, Trace
from harness.trace.timeline import send_order
from harness.trace.weka import WEKA_BLOCK

DEFAULT_MODEL = "agentic-harness"
_SYSTEM_ID = re.compile(r"weka-sys(\d+)-tools(\d+)$")  # how `weka.py` names an imported prefix


class _Family:
    """Hash ids and prompt lengths of one main session and its subagents."""

    def __init__(self, trace: Trace, content: Content, hasher: BlockHasher, mask: bool) -> None:
        self.trace, self.content, self.hasher, self.mask = trace, content, hasher, mask
        self.ends: dict[str, tuple[int, int]] = {}  # session -> (hasher state, prompt length)

    def prompt(self, s: Session, k: int) -> tuple[int, list[int]]:
        turn = s.turns[k]
        if turn.hash_ids is not None and self.trace.header.block_size == WEKA_BLOCK:
            ids = list(turn.hash_ids)
            return turn.input_tokens or 0, [h & LOCAL_MASK for h in ids] if self.mask else ids
        if self.content.appends_to_previous(s.id, k):
            state, length = self.ends[s.id]
            segs = self.content.new_segments(s.id, k)
        else:
            state, length, segs = 0, 0, self.content.segments(s.id, k)
        state = self.hasher.extend(segs, state)
        length += sum(seg.length for seg in segs)
        self.ends[s.id] = (state, length)
        return length, self.hasher.ids(state)


def _prefix_tokens(s: Session) -> tuple[int, int]:
    """(system_tokens, tool_tokens): an imported trace's split, else all system prompt."""
    m = _SYSTEM_ID.match(s.system_id)
    return (
        (int(m[1]), int(m[2]))
        if m and int(m[1]) + int(m[2]) == s.system_tokens
        else (s.system_tokens, 0)
    )


class WekaWriter:
    def __init__(self, trace: Trace, *, model: str = DEFAULT_MODEL, scope: str = "local") -> None:
        if scope not in ("local", "global"):
            raise ValueError(f"hash_id_scope must be 'local' or 'global', got {scope!r}")
        self.trace, self.model, self.scope = trace, model, scope
        self.times = {(sid, k): t for t, sid, k in send_order(trace)}
        self.content = Content(trace, cache_size=64)
        self.mask = scope == "local" and trace.header.meta.get("hash_id_scope") == "local"
        self._hasher = BlockHasher(WEKA_BLOCK)

    def traces(self) -> Iterator[dict]:
        for s in self.trace.main_sessions:
            hasher = BlockHasher(WEKA_BLOCK) if self.scope == "local" else self._hasher
            family = _Family(self.trace, self.content, hasher, self.mask)
            system, tools = _prefix_tokens(s)
            yield {
                "id": s.id,
                "models": [self.model],
                "block_size": WEKA_BLOCK,
                "hash_id_scope": self.scope,
                "tool_tokens": tools,
                "system_tokens": system,
                "requests": self._requests(s, family),
            }

    def _requests(self, s: Session, family: _Family) -> list[dict]:
        out: list[dict] = []
        for k, turn in enumerate(s.turns):
            n_in, ids = family.prompt(s, k)
            out.append({
                "t": round(self.times[(s.id, k)], 6), "type": "n", "model": self.model,
                "in": n_in, "out": turn.output_tokens, "hash_ids": ids, "think_time": turn.think_s,
            })  # fmt: skip
            for child_id in turn.spawns:
                child = self.trace.session(child_id)
                system, tools = _prefix_tokens(child)
                out.append({
                    "t": round(self.times[(s.id, k)], 6), "type": "subagent", "agent_id": child_id,
                    "subagent_type": child.mode or "spawn", "status": "completed", "models": [self.model],
                    "tool_tokens": tools, "system_tokens": system, "requests": self._requests(child, family),
                })  # fmt: skip
        return out


def write_weka(
    trace: Trace,
    path: str | Path,
    *,
    model: str = DEFAULT_MODEL,
    scope: str = "local",
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write one JSON file per main session into directory `path` (as the corpora are published),
    or one trace per line when `path` ends in `.jsonl`. Returns the number of traces."""
    path = Path(path)
    writer = WekaWriter(trace, model=model, scope=scope)
    traces = writer.traces()
    if progress is not None:
        traces = (progress(n) or obj for n, obj in enumerate(traces, start=1))
    if path.suffix == ".jsonl":
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path) as tmp, tmp.open("wb") as fh:
            n = sum(fh.write(orjson.dumps(obj) + b"\n") > 0 for obj in traces)
        return n
    if path.exists() and not path.is_dir():
        raise TraceFormatError(
            "Weka output is a directory (or a .jsonl file), and a file is in the way", path=path
        )
    path.mkdir(parents=True, exist_ok=True)
    n = 0
    for n, obj in enumerate(traces, start=1):
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", obj["id"])
        (path / f"{n - 1:06d}-{name}.json").write_bytes(orjson.dumps(obj))
    return n
