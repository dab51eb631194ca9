"""What to send for one turn: the trace's segments materialized for the chosen API.

History is the trace's recorded outputs by default, so each prompt is byte-identical to the
previous prompt + its output + the new input (exact prefix reuse). With live history, the text
of every earlier *assistant* segment that has a live reply is replaced by that reply's text, in
chat messages and text prompts. Token-id prompts keep the recorded outputs: a streamed reply is
text, and re-tokenizing it with an unknown tokenizer would change the prompt's length and
identity in ways the trace cannot account for.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.trace.content import Content, Segment, chat_messages


class PromptBuilder:
    def __init__(
        self, content: Content, *, api: str, prompt_format: str, live: dict | None = None
    ) -> None:
        self.content = content
        self.api = api
        self.prompt_format = prompt_format
        self.live = live  # (session id, turn) -> reply text; None for recorded history
        # recorded history: the content's own (cached) texts, without a wrapper call per segment
        self._text_of = content.segment_text if live is None else self._text
        self._last: dict[str, tuple[int, list[dict]]] = {}  # session -> (segments, messages)

    def _text(self, seg: Segment) -> str:
        if self.live is not None and seg.role == "assistant" and seg.key[0] == "out":
            reply = self.live.get((seg.key[1], seg.key[2]))
            if reply is not None:
                return reply
        return self.content.segment_text(seg)

    def messages(self, segments: Sequence[Segment]) -> list[dict]:
        return chat_messages(segments, self._text_of)

    def prompt(self, segments: Sequence[Segment]) -> list[int] | str:
        if self.prompt_format == "text":
            text_of = self._text_of
            return " ".join([text_of(s) for s in segments if s.length])
        ids: list[int] = []
        for seg in segments:
            ids.extend(self.content.segment_token_ids(seg).tolist())
        return ids

    def build(
        self, segments: Sequence[Segment], *, session: str | None = None, reuse: int = 0
    ) -> tuple[list[dict] | None, list[int] | str | None]:
        """(messages, prompt) for the request; the one the API does not use is None.

        `reuse`: how many leading segments are `session`'s previous prompt (0: none). Chat
        messages then extend that prompt's messages instead of rebuilding them: its last message
        is the user's and the first new segment is the assistant's output, so nothing merges
        across the seam, and the texts it holds cannot have changed (live replies only appear).
        """
        if self.api != "chat":
            return None, self.prompt(segments)
        last = self._last.get(session) if reuse else None
        if last is not None and last[0] == reuse:
            messages = last[1] + self.messages(segments[reuse:])
        else:
            messages = self.messages(segments)
        if session is not None:
            self._last[session] = (len(segments), messages)
        return messages, None

    def forget(self, session: str) -> None:
        """Drop what `build` kept for `session` (its last chat prompt)."""
        self._last.pop(session, None)
