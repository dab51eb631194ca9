"""The bodies of OpenAI's `/v1/chat/completions` and `/v1/completions` requests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import orjson

from harness.driver.apis.openai.decode import ChatStreamDecoder
from harness.driver.apis.shared import SharedFields, output_length
from harness.driver.apis.stream import StreamDecoder
from harness.driver.target import RequestSpec

if TYPE_CHECKING:
    from harness.driver.http import HTTPTargetConfig


class OpenAIRequest:
    """Chat (`messages`, `tools`) or completions (`prompt`: token ids or text) bodies."""

    def __init__(self, config: HTTPTargetConfig) -> None:
        self.config, self.shared = config, SharedFields(config)
        self.chat = config.api == "chat"

    def headers(self) -> dict[str, str]:
        key = self.config.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def decoder(self, keep_text: bool) -> ChatStreamDecoder:
        return ChatStreamDecoder(keep_text=keep_text)

    def finished(self, req: RequestSpec, dec: StreamDecoder) -> None:
        pass

    def body(self, req: RequestSpec) -> dict:
        body = self._fields(req)
        if self.chat:
            body["messages"] = req.messages
            if req.tools:
                body["tools"] = req.tools
                if self.config.tool_choice is not None:
                    body["tool_choice"] = self.config.tool_choice
        else:
            p = req.prompt
            body["prompt"] = p.tolist() if isinstance(p, np.ndarray) else p
        return body

    def _fields(self, req: RequestSpec) -> dict:
        """The body without the prompt."""
        c = self.config
        n = output_length(req)
        body: dict = {"model": c.model, "max_tokens": n, "stream": True}
        body["stream_options"] = (
            {"include_usage": True, "continuous_usage_stats": True}
            if c.continuous_usage is True  # "auto" is resolved when the target starts
            else {"include_usage": True}
        )
        return body | self.shared(req, n)

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        """The request's JSON body, in pieces to send in order (`b"".join` gives the JSON).

        Token ids already in JSON (`req.prompt_json`, ~7 bytes per id: ~1 MB at 142k tokens)
        are one piece as they are, not encoded again nor copied into one buffer."""
        if req.prompt_json is None or self.chat:
            return (orjson.dumps(self.body(req)),)
        rest = orjson.dumps(self._fields(req))
        return (b'{"prompt":[', req.prompt_json, b"]," + rest[1:])
