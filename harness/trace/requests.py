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
With tool-shaped turns a live reply replaces an assistant turn's text and the trace's tool call
stays: the next turn's input is that call's result, which must have its call to answer (a
reply's own tool calls, when a server parses any, are not read back).
Extending is safe with live replies: a prompt's texts cannot change once built, because a reply
only ever appears for a turn that has ended, before any prompt that contains it is built.

Token-id prompts are numpy arrays, with their JSON text (`Prompt.ids_json`) extended alongside:
at 142k tokens a Python list costs ~0.5 ms to copy per turn, ~1 ms to encode per request and a
traversal by every cyclic-GC pass that reaches it. Both grow in place (`_Growing`: capacity
doubles), so a turn costs its new tokens, not its whole prompt; each prompt is a view that later
turns write past, never into.

A driver that must not hold its event loop for long builds prompts with `prompt_steps`: the same
prompt, with a pause (`None`) after each ~`STEP_TOKENS` tokens of new work. That matters for a
prompt built from nothing deep into a session (a mid-trajectory start, a retry, a cycle's first
turn): ~300k tokens are ~10-20 ms of work, long enough to delay every other stream's stamps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from harness.trace.chat_form import ChatForm, chat_messages
from harness.trace.content import Content, Segment, TokenCounter, TokenEncoder
from harness.trace.model import Trace

STEP_TOKENS = 4096  # prompt_steps: new tokens materialized between two pauses (~0.1-0.2 ms)
JSON_BYTES = 7  # room for a token id's JSON, per token, when a buffer is sized


@dataclass(slots=True)
class Prompt:
    """One request's prompt: its length in trace tokens and the body for the API."""

    n_tokens: int
    messages: list[dict] | None = None  # chat API
    body: np.ndarray | str | None = None  # completions API: token ids (int64) or text
    # token ids: the body as JSON array items, b"1,2,3" (no brackets), a read-only bytes view
    ids_json: bytes | memoryview | None = None
    tools: list[dict] | None = None  # chat API, tool-shaped turns: the session's tool schemas


class _Growing:
    """A 1-d array appended to in place: capacity doubles, so n items cost O(n) amortized.

    `extend` returns a view of everything so far. Later appends write past its end, never into
    it, so an earlier turn's prompt stays intact; extending from an earlier end than the current
    one (a second continuation of one prompt) copies first.
    """

    __slots__ = ("buf", "n")

    def __init__(self, dtype, capacity: int = 0) -> None:
        self.buf = np.empty(capacity, dtype)  # untouched pages cost no memory until written
        self.n = 0

    def extend(self, end: int, items: np.ndarray) -> tuple[_Growing, np.ndarray]:
        """`items` appended after the first `end` items; returns the array it is in, and the view."""
        stop, old = end + len(items), self.buf
        grow = self if end == self.n else _Growing(old.dtype)  # else: continue a copy
        if grow is not self or stop > len(old):
            grow.buf = np.empty(max(stop, 2 * len(old), 4096), old.dtype)
            grow.buf[:end] = old[:end]
        grow.buf[end:stop] = items
        grow.n = stop
        view = grow.buf[:stop]
        view.flags.writeable = False
        return grow, view


@dataclass(slots=True)
class SessionPrompt:
    """A session's last materialized prompt: the state its next turn extends."""

    turn: int
    segments: list[Segment]
    prompt: Prompt
    ids: _Growing | None = None  # token ids: the buffers its prompt's arrays are views of
    json: _Growing | None = None
    capacity: int = 0  # token ids new buffers are sized for


class RequestSource:
    def __init__(
        self,
        trace: Trace,
        *,
        api: str,
        prompt_format: str = "tokens",
        salt: str | None = None,
        token_counter: TokenCounter | None = None,
        token_encoder: TokenEncoder | None = None,
        live: bool = False,
    ) -> None:
        self.trace = trace
        self.content = Content(
            trace, salt=salt, token_counter=token_counter, token_encoder=token_encoder
        )
        self.chat = ChatForm(self.content)  # the same content as chat messages, tools and calls
        # messages and responses requests are built from chat messages (harness.driver)
        self.api = "completions" if api == "completions" else "chat"
        self.prompt_format = prompt_format
        self.live: dict[tuple[str, int], str] | None = {} if live else None
        self._sessions: dict[str, SessionPrompt] = {}

    def prompt(self, session_id: str, turn: int) -> Prompt:
        """The prompt of `turn` of a session (turns of one session are asked for in order)."""
        for prompt in self.prompt_steps(session_id, turn):
            if prompt is not None:
                return prompt
        raise AssertionError("prompt_steps ended without a prompt")

    def prompt_steps(self, session_id: str, turn: int) -> Iterator[Prompt | None]:
        """`prompt`, in steps: None after each ~STEP_TOKENS new tokens of token ids, the prompt
        last. The session's state changes only at the end."""
        last = self._sessions.get(session_id)
        if (
            last is not None
            and last.turn == turn - 1
            and self.content.appends_to_previous(session_id, turn)
        ):
            new = self.content.new_segments(session_id, turn)
            segments = last.segments + new
        else:
            last, new = None, self.content.segments(session_id, turn)
            segments = new
        empty = self._empty(session_id) if last is None else last.prompt
        state = SessionPrompt(turn, segments, empty)
        if last is not None:
            state.ids, state.json = last.ids, last.json
        elif self.api != "chat" and self.prompt_format == "tokens":
            state.capacity = self._longest(session_id, turn)
            yield None  # listing a long session's segments twice is a step of its own
        if self.api == "chat" and self.content.recorded(session_id, turn) is not None:
            chat = self.chat  # a recorded turn: its own messages and tools
            tokens = sum(seg.length for seg in new)
            messages, tools = chat.messages(session_id, turn), chat.turn_tools(session_id, turn)
            state.prompt = Prompt(tokens, messages, tools=tools)
        elif self.api == "chat" or self.prompt_format == "text":
            state.prompt = self._extend(state.prompt, new)
        else:
            todo, size = [], 0
            for seg in new:
                todo.append(seg)
                size += seg.length
                if size >= STEP_TOKENS:
                    self._extend_ids(state, todo)
                    todo, size = [], 0
                    yield None
            self._extend_ids(state, todo)
        self._sessions[session_id] = state
        yield state.prompt

    def _longest(self, session_id: str, turn: int) -> int:
        """The longest prompt that extends `turn`'s: the session's last, when every later turn
        appends to the one before (a generated session); else `turn`'s own."""
        content, n = self.content, len(self.trace.session(session_id).turns)
        if all(content.appends_to_previous(session_id, k) for k in range(turn + 1, n)):
            return content.prompt_length(session_id, n - 1)
        return content.prompt_length(session_id, turn)

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

    def _empty(self, session_id: str) -> Prompt:
        if self.api == "chat":
            return Prompt(0, [], tools=self.chat.tools(session_id))
        if self.prompt_format == "text":
            return Prompt(0, None, "")
        return Prompt(0, None, np.empty(0, dtype=np.int64), b"")

    def _extend(self, prompt: Prompt, segments: Sequence[Segment]) -> Prompt:
        """`prompt` followed by `segments`. Chat: the previous prompt's last message is the
        user's and the first appended segment is the assistant's output, so nothing merges across
        the seam."""
        tokens = prompt.n_tokens + sum(s.length for s in segments)
        if self.api == "chat":
            assert prompt.messages is not None  # a chat prompt always carries messages
            calls = self.chat.calls_of
            new = chat_messages(segments, self.text, calls)
            return Prompt(tokens, prompt.messages + new, None, tools=prompt.tools)
        if self.prompt_format == "text":
            assert isinstance(prompt.body, str)  # a text prompt's body is its text
            parts = [self.text(s) for s in segments if s.length]
            body = " ".join([prompt.body, *parts] if prompt.body else parts)
            return Prompt(tokens, None, body)
        state = SessionPrompt(-1, [], prompt)
        self._extend_ids(state, segments)
        return state.prompt

    def _extend_ids(self, state: SessionPrompt, segments: Sequence[Segment]) -> None:
        """Token ids: `state.prompt` followed by `segments`, appended in place."""
        prompt = state.prompt
        body = prompt.body
        assert isinstance(body, np.ndarray)  # a token-id prompt's body is its ids
        tokens = prompt.n_tokens + sum(s.length for s in segments)
        new = [self.content.segment_token_ids(seg) for seg in segments if seg.length]
        if not new:
            state.prompt = Prompt(tokens, None, body, prompt.ids_json)
            return
        added = np.concatenate(new).astype(np.int64, copy=False)
        items = orjson.dumps(added, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
        n_json = len(prompt.ids_json) if prompt.ids_json is not None else 0
        if n_json:
            items = b"," + items
        if state.ids is None or state.json is None:  # new buffers, sized for the longest prompt
            cap = max(state.capacity, len(body) + len(added))
            state.ids, state.json = _Growing(np.int64, cap), _Growing(np.uint8, JSON_BYTES * cap)
            state.ids.extend(0, np.asarray(body, np.int64))
            state.json.extend(0, np.frombuffer(prompt.ids_json or b"", np.uint8))
        state.ids, ids = state.ids.extend(len(body), added)
        state.json, text = state.json.extend(n_json, np.frombuffer(items, np.uint8))
        # .data, not memoryview(text): numpy types ndarray as a buffer only from Python 3.12
        state.prompt = Prompt(tokens, None, ids, text.data.toreadonly())

    def text(self, seg: Segment) -> str:
        """A segment's text in the prompt: a live reply for an answered assistant output, else
        the trace's (in a chat message, as `Content.message_text` words it)."""
        if self.live is not None and seg.role == "assistant" and seg.key[0] == "out":
            reply = self.live.get((seg.key[1], seg.key[2]))
            if reply is not None:
                return reply
        if self.api == "chat":
            return self.chat.message_text(seg)
        return self.content.segment_text(seg)
