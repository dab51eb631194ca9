"""The body of an OpenAI Responses request (`POST /v1/responses`), from the RequestSpec's OpenAI
chat messages and tools (convert.py).

With `previous_response_id` the server keeps the history: a session's next turn sends only the
items after what its last completed request sent (the tool results, the new user text), with
that response's id. The server's history then holds its own reply, not the trace's recorded
one, so the prompt is the trace's only in its new input (as with live history). The first turn,
a turn after a failed one, or one whose history is not the last request's extended (a forked
subagent's first turn), sends everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from harness.driver.apis.responses.convert import to_input, to_tools
from harness.driver.apis.responses.decode import ResponsesDecoder
from harness.driver.apis.shared import SharedFields, output_length
from harness.driver.apis.stream import StreamDecoder
from harness.driver.target import RequestSpec

if TYPE_CHECKING:
    from harness.driver.http import HTTPTargetConfig


@dataclass(frozen=True, slots=True)
class _Sent:
    """What a session's last completed request sent, and the server's id for it."""

    response_id: str
    length: int  # its chat messages
    last: dict  # its last message: the next turn's history extends it only if it holds it


class ResponsesRequest:
    def __init__(self, config: HTTPTargetConfig) -> None:
        self.config, self.shared = config, SharedFields(config)
        self._sent: dict[str, _Sent] = {}  # by session id (server-kept history only)

    def headers(self) -> dict[str, str]:
        key = self.config.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def decoder(self, keep_text: bool) -> StreamDecoder:
        return ResponsesDecoder(keep_text=keep_text)

    def finished(self, req: RequestSpec, dec: StreamDecoder) -> None:
        """A request completed: its response id starts the session's next turn."""
        rid = dec.response_id if isinstance(dec, ResponsesDecoder) else None
        if self.config.previous_response_id and rid and req.messages:
            self._sent[req.session_id] = _Sent(rid, len(req.messages), req.messages[-1])

    def body(self, req: RequestSpec) -> dict:
        c = self.config
        chat, previous = self._new_part(req)
        instructions, items = to_input(chat)
        if previous is not None and req.messages and req.messages[0]["role"] == "system":
            instructions = to_input(req.messages[:1])[0]  # never carried over by the server
        n = output_length(req)
        body: dict = {"model": c.model, "max_output_tokens": n, "stream": True}
        body["store"] = c.previous_response_id  # keep nothing on the server unless asked to
        if previous is not None:
            body["previous_response_id"] = previous
        if instructions:
            body["instructions"] = instructions
        tools = to_tools(req.tools)
        if tools:
            body["tools"] = tools
        body["input"] = items
        return body | self.shared(req, n)

    def _new_part(self, req: RequestSpec) -> tuple[list[dict], str | None]:
        """The chat messages to send, and the previous response's id when the server holds the
        rest: the messages after the last request's, less the assistant turn that the server's
        own reply stands for."""
        messages = req.messages or []
        sent = self._sent.get(req.session_id) if self.config.previous_response_id else None
        if sent is None or len(messages) <= sent.length or messages[sent.length - 1] != sent.last:
            return messages, None
        new = messages[sent.length :]
        while new and new[0]["role"] == "assistant":
            new = new[1:]
        return new, sent.response_id

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        return (orjson.dumps(self.body(req)),)
