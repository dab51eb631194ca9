"""The trace model: sessions of ordered turns, with subagents that fork or spawn and join.

A turn's prompt is the session's context after the previous turn plus the turn's new input
(see docs/architecture.md, "Trace model"). Turns imported from block-addressed traces (Mooncake,
Weka) instead carry the prompt's block `hash_ids` and its whole length `input_tokens`; turns
recorded by `harness record` carry their whole prompt (`prompt`, `harness.trace.recorded`).
Nothing here materializes token ids: a 142k-token prompt is a handful of integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from harness.trace.recorded import RecordedPrompt

Mode = Literal["fork", "spawn"]


@dataclass(frozen=True, slots=True)
class Turn:
    new_input_tokens: int  # tool result / user message appended before the call
    output_tokens: int
    think_s: float = 0.0  # delay between the previous turn's end (or session start) and this send
    spawns: tuple[str, ...] = ()  # sessions started after this turn; the next turn joins them
    # block-addressed prompt (imported traces): a tuple, or a HashIds sharing the previous turn's
    hash_ids: Sequence[int] | None = None
    input_tokens: int | None = None  # whole prompt length, set with hash_ids
    prompt: RecordedPrompt | None = None  # a recorded turn's whole prompt (harness record)


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    arrival_s: float
    system_tokens: int
    system_id: str
    turns: tuple[Turn, ...]
    parent: str | None = None
    fork_turn: int | None = None
    mode: Mode | None = None  # None for a main session

    @property
    def agent(self) -> str:
        return "main" if self.parent is None else "sub"


TRACE_FORMAT = "agentic-harness-trace"
TRACE_VERSION = 1


@dataclass(frozen=True)
class TraceHeader:
    seed: int | None = None
    profile: str | None = None  # profile name, or the source format for imports
    block_size: int = 16  # block size of hash_ids (imports); cache granularity hint otherwise
    meta: dict = field(default_factory=dict)  # free-form: scale, source file, generator knobs
    format: str = TRACE_FORMAT
    version: int = TRACE_VERSION


@dataclass(frozen=True)
class Trace:
    header: TraceHeader
    sessions: tuple[Session, ...]

    @cached_property
    def by_id(self) -> dict[str, Session]:
        return {s.id: s for s in self.sessions}

    def session(self, session_id: str) -> Session:
        return self.by_id[session_id]

    @property
    def main_sessions(self) -> list[Session]:
        return [s for s in self.sessions if s.parent is None]

    @cached_property
    def children(self) -> dict[str, list[str]]:
        kids: dict[str, list[str]] = {}
        for s in self.sessions:
            if s.parent is not None:
                kids.setdefault(s.parent, []).append(s.id)
        return kids

    def family(self, root_id: str) -> list[Session]:
        """A main session and all its descendants, parents before children."""
        out, stack = [], [root_id]
        while stack:
            sid = stack.pop()
            out.append(self.by_id[sid])
            stack.extend(reversed(self.children.get(sid, [])))
        return out

    @property
    def num_requests(self) -> int:
        return sum(len(s.turns) for s in self.sessions)
