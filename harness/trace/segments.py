"""A prompt's layout: which segments it is made of, in order (what `Content` materializes).

A prompt is the salt (when set), the system prompt or the inherited context of a fork, each
earlier turn's new input and output, and this turn's new input; after a join the new input
starts with the subagents' reports, and with tool-shaped turns a new input is the previous
call's result (role `tool`, `harness.trace.tool_calls`). Imported block-addressed turns are
their hash-id blocks; recorded turns (`harness record`) their recorded prompt's chunks and units
(`harness.trace.recorded`). Equal keys mean identical content, which is what the ideal cache
walks.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.trace import recorded, tool_calls, tool_set
from harness.trace.model import Session, Trace

SALT_TOKENS = 8  # length of the per-run salt segment that starts every prompt when a salt is set
SEGMENT_KINDS = (
    "system",
    "inherited",
    "history",
    "previous_output",
    "reports",
    "tool_result",
    "new_input",
)


@dataclass(frozen=True, slots=True)
class Segment:
    key: tuple  # identity: equal keys have identical content
    length: int  # tokens
    role: str  # "system" | "user" | "assistant" | "tool"
    call: str | None = None  # a tool result's tool_call_id


class Layout:
    """The segments of a trace's prompts; `Content` adds what they say."""

    trace: Trace
    seed: int
    salt: str | None
    block_size: int
    turn_form: str
    _plans: dict[tuple[str, int], tool_calls.Call | None]

    # ---- segments -------------------------------------------------------------------------

    def segments(self, session_id: str, turn: int) -> list[Segment]:
        """The prompt of `turn` of a session as segments, in order."""
        s = self.trace.session(session_id)
        head = [Segment(("salt", self.salt), SALT_TOKENS, "system")] if self.salt else []
        t = s.turns[turn]
        if t.hash_ids is not None:
            return head + self._block_segments(s, turn)
        if t.prompt is not None:
            return head + [Segment(*p) for p in recorded.pieces(t.prompt)]
        return head + self._context(s, turn) + self._new_input(s, turn)

    def labelled(self, session_id: str, turn: int) -> list[tuple[str, Segment]]:
        """`segments`, each with the part of the prompt it is (`SEGMENT_KINDS`): the salt and
        system prompt `system`, a forked parent's context `inherited`, the session's own earlier
        turns `history` but for the last turn's reply, `previous_output` (no earlier prompt had
        it), and this turn's new input: subagents' `reports` (a join), a `tool_result`, or
        `new_input` (a user message, a subagent's task). Block-mode turns: the blocks the
        previous turn's prompt had at the same place are `history`, the rest `new_input`."""
        s = self.trace.session(session_id)
        head = (
            [("system", Segment(("salt", self.salt), SALT_TOKENS, "system"))] if self.salt else []
        )
        if s.turns[turn].hash_ids is not None:
            return head + self._labelled_blocks(s, turn)
        if s.turns[turn].prompt is not None:
            return head + self._labelled_recorded(s, turn)
        context = self._context(s, turn)
        own = sum(len(self._new_input(s, j)) + 1 for j in range(turn))
        inherited_end = len(context) - own
        last = ("out", s.id, turn - 1)
        out = head + [
            (_context_kind(seg, i < inherited_end, seg.key == last), seg)
            for i, seg in enumerate(context)
        ]
        return out + [(self._input_kind(seg, turn), seg) for seg in self._new_input(s, turn)]

    @staticmethod
    def _input_kind(seg: Segment, turn: int) -> str:
        if seg.key[0] == "out":
            return "reports"  # a subagent's final output, joined
        if turn > 0 and seg.role == "tool":
            return "tool_result"
        return "new_input"

    def _labelled_blocks(self, s: Session, turn: int) -> list[tuple[str, Segment]]:
        segs = self._block_segments(s, turn)
        before = (
            self._block_segments(s, turn - 1) if turn > 0 and s.turns[turn - 1].hash_ids else []
        )
        same = 0
        while same < min(len(segs), len(before)) and segs[same] == before[same]:
            same += 1
        return [("history" if i < same else "new_input", seg) for i, seg in enumerate(segs)]

    def _labelled_recorded(self, s: Session, turn: int) -> list[tuple[str, Segment]]:
        """A recorded prompt: what the previous turn's prompt had at the same place is history
        (tools and system messages at the start: system); of the rest, tool results are
        `tool_result`, assistant messages `previous_output`, the others `new_input`."""
        prompt = s.turns[turn].prompt
        assert prompt is not None
        segs = [Segment(*p) for p in recorded.pieces(prompt)]
        before = s.turns[turn - 1].prompt if turn > 0 else None
        old = [Segment(*p) for p in recorded.pieces(before)] if before is not None else []
        same = 0
        while same < min(len(segs), len(old)) and segs[same] == old[same]:
            same += 1
        opening = next((i for i, seg in enumerate(segs) if seg.role != "system"), len(segs))
        kinds = {"tool": "tool_result", "assistant": "previous_output"}
        return [
            (
                "system"
                if i < opening
                else "history"
                if i < same
                else kinds.get(seg.role, "new_input"),
                seg,
            )
            for i, seg in enumerate(segs)
        ]

    def appends_to_previous(self, session_id: str, turn: int) -> bool:
        """Whether turn `turn`'s prompt is the previous turn's plus `new_segments` (block-mode
        turns from imported traces and recorded turns carry whole prompts instead)."""
        turns = self.trace.session(session_id).turns
        if turn == 0:
            return False
        now, before = turns[turn], turns[turn - 1]
        blocks = now.hash_ids is not None or before.hash_ids is not None
        return not blocks and now.prompt is None and before.prompt is None

    def new_segments(self, session_id: str, turn: int) -> list[Segment]:
        """What turn `turn` (> 0, not block-mode) appends to the previous turn's prompt."""
        s = self.trace.session(session_id)
        return [self.output_segment(session_id, turn - 1), *self._new_input(s, turn)]

    def recorded(self, session_id: str, turn: int) -> recorded.RecordedPrompt | None:
        """A recorded turn's prompt (`harness record`), or None."""
        return self.trace.session(session_id).turns[turn].prompt

    def output_segment(self, session_id: str, turn: int) -> Segment:
        s = self.trace.session(session_id)
        return Segment(("out", s.id, turn), s.turns[turn].output_tokens, "assistant")

    def prompt_length(self, session_id: str, turn: int) -> int:
        return sum(seg.length for seg in self.segments(session_id, turn))

    def _context(self, s: Session, turn: int) -> list[Segment]:
        """Everything before turn `turn`'s new input: inherited context + own earlier turns."""
        if s.mode == "fork" and s.parent is not None:
            parent = self.trace.session(s.parent)
            fork = s.fork_turn or 0
            base = self._context(parent, fork) + self._new_input(parent, fork)
            base.append(
                Segment(("out", parent.id, fork), parent.turns[fork].output_tokens, "assistant")
            )
        else:
            base = (
                [Segment(("sys", s.system_id), s.system_tokens, "system")]
                if s.system_tokens
                else []
            )
        for j in range(turn):
            base += self._new_input(s, j)
            base.append(Segment(("out", s.id, j), s.turns[j].output_tokens, "assistant"))
        return base

    def _new_input(self, s: Session, turn: int) -> list[Segment]:
        """A turn's new input; after a join it starts with the subagents' final outputs. Tool
        form: the previous turn's tool result (a join: one per subagent's Task call)."""
        tools = self.turn_form == "tools"
        if tools and turn == 0 and s.mode == "fork":
            return self._fork_task(s)
        remaining = s.turns[turn].new_input_tokens
        segs: list[Segment] = []
        role, call = "user", None
        if turn > 0:
            spawned = s.turns[turn - 1].spawns
            ids = self.plan(s.id, turn - 1) if tools else None
            for i, child_id in enumerate(spawned):
                child = self.trace.session(child_id)
                last = len(child.turns) - 1
                n = min(child.turns[last].output_tokens, remaining)
                if n > 0 or ids is not None:
                    result = ids.ids[i] if ids is not None else None
                    segs.append(
                        Segment(("out", child.id, last), n, "tool" if tools else "user", result)
                    )
                    remaining -= n
            if ids is not None and not spawned:
                role, call = "tool", ids.ids[0]
        if remaining > 0 or not segs:
            segs.append(Segment(("in", s.id, turn), remaining, role, call))
        return segs

    def _fork_task(self, s: Session) -> list[Segment]:
        """A forked subagent's first input: the result of its own Task call (its task); its
        siblings' calls, made in the same turn, get empty results, so every call is answered."""
        assert s.parent is not None
        parent = self.trace.session(s.parent)
        k = s.fork_turn or 0
        call = self.plan(parent.id, k)
        assert call is not None  # a turn that starts subagents calls Task
        n = s.turns[0].new_input_tokens
        return [
            Segment(("in", s.id, 0), n, "tool", cid)
            if sib == s.id
            else Segment(("res", sib, 0), 0, "tool", cid)
            for sib, cid in zip(parent.turns[k].spawns, call.ids, strict=True)
        ]

    def plan(self, session_id: str, turn: int) -> tool_calls.Call | None:
        """The tool call a turn makes (tool-shaped turns), planned once."""
        key = (session_id, turn)
        if key not in self._plans:
            s = self.trace.session(session_id)
            tools = tool_set.names(self.seed, s.system_id, s.system_tokens)
            self._plans[key] = tool_calls.plan_call(self.seed, self.trace, s, turn, tools)
        return self._plans[key]

    def _block_segments(self, s: Session, turn: int) -> list[Segment]:
        t = s.turns[turn]
        assert t.hash_ids is not None and t.input_tokens is not None
        b, left, segs = self.block_size, t.input_tokens, []
        for h in t.hash_ids:
            if left <= 0:
                break
            segs.append(Segment(("blk", h), min(b, left), "user"))
            left -= b
        if left > 0:
            segs.append(Segment(("tail", s.id, turn), left, "user"))
        return segs


def _context_kind(seg: Segment, inherited: bool, previous_output: bool) -> str:
    if seg.key[0] == "sys":
        return "system"
    if inherited:
        return "inherited"
    return "previous_output" if previous_output else "history"
