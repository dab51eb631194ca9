"""Chat messages of a trace's prompts: plain text turns, or tool-shaped ones (`turn_form: tools`).

Segments become OpenAI chat messages (`chat_messages`); with tool-shaped turns
(`harness.trace.tool_calls`) an assistant output is a short explanation and its tool calls, the
next turn's input the calls' results (role `tool`), and every prompt carries the session's tool
schemas. The schemas are part of the system prompt's trace tokens (a profile's system prompts
are "system prompt + tool schemas"), so the system text is shortened by their cost; a scaled
system prompt gets a scaled tool set (`trace.tool_set`), so some system text always remains.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence

from harness.trace import code_text, recorded, tool_calls, tool_set
from harness.trace.content import Content, Segment, word_list
from harness.trace.tool_calls import Call, stable_hash


class ChatForm:
    """The chat messages, tools and tool calls of one `Content`'s prompts."""

    def __init__(self, content: Content) -> None:
        self.content = content
        self._calls: OrderedDict[tuple, list[dict] | None] = OrderedDict()
        self._tools: dict[str, tuple[list[dict], int]] = {}

    def messages(self, session_id: str, turn: int) -> list[dict]:
        """OpenAI chat messages of a turn's prompt (see `chat_messages`; a recorded turn: its
        own messages, `trace.recorded.chat_messages`)."""
        prompt = self.content.recorded(session_id, turn)
        if prompt is not None:
            return recorded.chat_messages(prompt, self._recorded_text, self.content.salt)
        segments = self.content.segments(session_id, turn)
        return chat_messages(segments, self.message_text, self.calls_of)

    def turn_tools(self, session_id: str, turn: int) -> list[dict] | None:
        """The tool schemas a turn sends: a recorded turn's own, else the session's."""
        prompt = self.content.recorded(session_id, turn)
        if prompt is not None:
            return recorded.chat_tools(prompt, self._recorded_text)
        return self.tools(session_id)

    def _recorded_text(self, key: tuple, tokens: int, role: str) -> str:
        return self.content.segment_text(Segment(key, tokens, role))

    @property
    def calls_of(self) -> Callable[[Segment], list[dict] | None] | None:
        return self.tool_calls if self.content.turn_form == "tools" else None

    def message_text(self, seg: Segment) -> str:
        """A segment's text in a chat message: with tools, an assistant turn's text is the short
        explanation before its call, and the system prompt leaves room for the tool schemas."""
        if self.content.turn_form == "tools" and seg.key[0] == "out" and seg.role == "assistant":
            call = self._plan(seg.key[1], seg.key[2])
            if call is not None:
                return self.content.segment_text(
                    Segment(("say", *seg.key[1:]), call.explanation, "assistant")
                )
        if self.content.turn_form == "tools" and seg.key[0] == "sys":
            cost = self._tool_schemas(seg.key[1], seg.length)[1]
            return self.content.segment_text(Segment(seg.key, max(0, seg.length - cost), seg.role))
        return self.content.segment_text(seg)

    def tools(self, session_id: str) -> list[dict] | None:
        """The session's tool schemas (OpenAI chat form), or None when turns are plain."""
        s = self.content.trace.session(session_id)
        if self.content.turn_form != "tools" or any(t.hash_ids is not None for t in s.turns):
            return None
        return self._tool_schemas(s.system_id, s.system_tokens)[0]

    def _tool_schemas(self, system_id: str, system_tokens: int) -> tuple[list[dict], int]:
        """A system prompt's tools (scaled to fit it, `trace.tool_set`) and what they cost in
        trace tokens (their JSON's tokens)."""
        if system_id not in self._tools:
            tools = tool_set.system_tools(self.content.seed, system_id, system_tokens)
            text = json.dumps(tools, ensure_ascii=False)
            count = self.content.counter
            cost = count(text) if count is not None else len(code_text.pieces_of(text))
            self._tools[system_id] = (tools, cost)
        return self._tools[system_id]

    def _plan(self, session_id: str, turn: int) -> Call | None:
        return self.content.plan(session_id, turn)

    def tool_calls(self, seg: Segment) -> list[dict] | None:
        """An assistant segment's tool calls (OpenAI chat form), or None."""
        if self.content.turn_form != "tools" or seg.role != "assistant" or seg.key[0] != "out":
            return None
        cached = self._calls.get(seg.key, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        sid, turn = seg.key[1], seg.key[2]
        call = self._plan(sid, turn)
        calls = (
            None
            if call is None
            else [self._tool_call(call, sid, turn, i) for i in range(len(call.ids))]
        )
        self.content.remember(self._calls, seg.key, calls)
        return calls

    def _tool_call(self, call: Call, sid: str, turn: int, i: int) -> dict:
        n = call.payloads[i]
        payload = self.content.segment_text(
            Segment(("arg", sid, turn, i, call.name), n, "assistant")
        )
        h = stable_hash(self.content.seed, "scaffold", sid, turn, i)
        path, line, words = self._scaffold(h)
        return tool_calls.tool_call(
            call, i, tool_calls.arguments(call, i, payload, path, line, words)
        )

    def _scaffold(self, h: int) -> tuple[str, str, str]:
        """A file path, one of its lines and a few words: the arguments outside the counts."""
        words = word_list(h, 10)
        if self.content.kind != "code":
            return f"/repo/{words[0]}/{words[1]}.py", " ".join(words[2:7]), " ".join(words[7:])
        corpus = code_text.corpus()
        path = corpus.pick(h)
        lines = corpus.lines(path)
        start = h % len(lines)
        line = next((ln.strip() for ln in lines[start:] + lines[:start] if ln.strip()), "pass")
        return code_text.REPO + path, line, " ".join(words[7:])


def chat_messages(
    segments: Sequence[Segment],
    text_of: Callable[[Segment], str],
    calls_of: Callable[[Segment], list[dict] | None] | None = None,
) -> list[dict]:
    """Segments -> chat messages. Consecutive system or user segments form one message (salt +
    system prompt; subagent results + tool output), and so do consecutive results of one tool
    call; every assistant output is its own message, even an empty one, so that turn k's
    messages stay a prefix of turn k+1's. An assistant output with tool calls carries them
    (`calls_of`), its text the message's content (None when it has none)."""
    msgs: list[dict] = []
    for seg in segments:
        text = text_of(seg) if seg.length else ""
        if seg.role == "assistant":
            calls = calls_of(seg) if calls_of is not None else None
            if calls:
                msgs.append({"role": "assistant", "content": text or None, "tool_calls": calls})
            else:
                msgs.append({"role": "assistant", "content": text})
            continue
        last = msgs[-1] if msgs else None
        if last is not None and last["role"] == seg.role and last.get("tool_call_id") == seg.call:
            if text:
                last["content"] = f"{last['content']} {text}" if last["content"] else text
        elif seg.role == "tool":
            msgs.append({"role": "tool", "tool_call_id": seg.call, "content": text})
        else:
            msgs.append({"role": seg.role, "content": text})
    return msgs
