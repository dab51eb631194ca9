"""What to send for each turn: a trace's sessions materialized into prompts, one request at a time.

`RequestSource.prompt(session, turn)` gives the prompt for the chosen API: token ids or text for
`/v1/completions`, chat messages for `/v1/chat/completions`. Turn k's prompt is turn k-1's plus
k-1's output plus k's new input, so a session's materialized prompt (`SessionPrompt`) is kept
and extended rather than rebuilt: a 100-turn session costs linear, not quadratic, work.

History is the trace's recorded outputs by default, so each prompt is byte-identical to the
previous prompt + its output + the new input (exact prefix reuse). With live history (`reply`
records what the server answered), the text of every earlier *assistant* segment that has a
live reply is replaced by that reply's text, in chat messages and text prompts. Token-id prompts
keep the recorded outputs: a streamed reply is text, and re-tokenizing it with an unknown
tokenizer would change the prompt's length and identity in ways the trace cannot account for.
Extending is safe with live replies: a prompt's texts cannot change once built, because a reply
only ever appears for a turn that has ended, before any prompt that contains it is built.

Token-id prompts are numpy arrays, with their JSON text (`Prompt.ids_json`) extended alongside:
at 142k tokens a Python list costs ~0.5 ms to copy per turn, ~1 ms to encode per request and a
traversal by every cyclic-GC pass that reaches it; the array and the JSON cost a memory copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from harness.trace.content import Content, Segment, TokenCounter, chat_messages
from harness.trace.model import Trace


@dataclass(slots=True)
class Prompt:
    """One request's prompt: its length in trace tokens and the body for the API."""

    tokens: int
    messages: list[dict] | None = None  # chat API
    body: np.ndarray | str | None = None  # completions API: token ids (int64) or text
    ids_json: bytes | None = None  # token ids: the body as JSON array items, b"1,2,3" (no brackets)


@dataclass(slots=True)
class SessionPrompt:
    """A session's last materialized prompt: the state its next turn extends."""

    turn: int
    segments: list[Segment]
    prompt: Prompt


class RequestSource:
    def __init__(
        self,
        trace: Trace,
        *,
        api: str,
        prompt_format: str = "tokens",
        salt: str | None = None,
        token_counter: TokenCounter | None = None,
        live: bool = False,
    ) -> None:
        self.trace = trace
        self.content = Content(trace, salt=salt, token_counter=token_counter)
        self.api = api
        self.prompt_format = prompt_format
        self.live: dict[tuple[str, int], str] | None = {} if live else None
        self._sessions: dict[str, SessionPrompt] = {}

    def prompt(self, session_id: str, turn: int) -> Prompt:
        """The prompt of `turn` of a session (turns of one session are asked for in order)."""
        last = self._sessions.get(session_id)
        if last is not None and last.turn == turn - 1 and self.content.appends_to_previous(session_id, turn):
            new = self.content.new_segments(session_id, turn)
            segments = last.segments + new
            prompt = self._extend(last.prompt, new)
        else:
            segments = self.content.segments(session_id, turn)
            prompt = self._extend(self._empty(), segments)
        self._sessions[session_id] = SessionPrompt(turn, segments, prompt)
        return prompt

    def reply(self, session_id: str, turn: int, text: str) -> None:
        """A live reply's text (live history only; otherwise ignored)."""
        if self.live is not None:
            self.live[(session_id, turn)] = text

    def forget(self, session_ids: Iterable[str]) -> None:
        """Drop the state of sessions that will send nothing more (a finished family)."""
        for sid in session_ids:
            self._sessions.pop(sid, None)
            if self.live is not None:
                for k in range(len(self.trace.session(sid).turns)):
                    self.live.pop((sid, k), None)

    # ---- materializing --------------------------------------------------------------------

    def _empty(self) -> Prompt:
        if self.api == "chat":
            return Prompt(0, [])
        if self.prompt_format == "text":
            return Prompt(0, None, "")
        return Prompt(0, None, np.empty(0, dtype=np.int64), b"")

    def _extend(self, prompt: Prompt, segments: Sequence[Segment]) -> Prompt:
        """`prompt` followed by `segments`. Chat: the previous prompt's last message is the
        user's and the first appended segment is the assistant's output, so nothing merges across
        the seam."""
        tokens = prompt.tokens + sum(s.length for s in segments)
        if self.api == "chat":
            return Prompt(tokens, prompt.messages + chat_messages(segments, self.text), None)
        if self.prompt_format == "text":
            parts = [self.text(s) for s in segments if s.length]
            body = " ".join([prompt.body, *parts] if prompt.body else parts)
            return Prompt(tokens, None, body)
        new = [self.content.segment_token_ids(seg) for seg in segments if seg.length]
        if not new:
            return Prompt(tokens, None, prompt.body, prompt.ids_json)
        added = np.concatenate(new).astype(np.int64, copy=False)
        items = orjson.dumps(added, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
        ids = np.concatenate([prompt.body, added])
        return Prompt(tokens, None, ids, b",".join((prompt.ids_json, items)) if prompt.ids_json else items)

    def text(self, seg: Segment) -> str:
        """A segment's text: a live reply for an answered assistant output, else the trace's."""
        if self.live is not None and seg.role == "assistant" and seg.key[0] == "out":
            reply = self.live.get((seg.key[1], seg.key[2]))
            if reply is not None:
                return reply
        return self.content.segment_text(seg)
