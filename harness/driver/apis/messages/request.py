"""The body and headers of an Anthropic Messages request (`POST /v1/messages`), from the
RequestSpec's OpenAI chat messages and tools (convert.py).

Headers: `anthropic-version`, and the key both as Anthropic's `x-api-key` and as a bearer token
(self-hosted servers that speak Messages, vLLM among them, check only `Authorization`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from harness.driver.apis.messages.convert import cache_breakpoints, to_messages, to_tools
from harness.driver.apis.messages.decode import MessagesDecoder
from harness.driver.apis.shared import SharedFields, output_length
from harness.driver.apis.stream import StreamDecoder
from harness.driver.target import RequestSpec

if TYPE_CHECKING:
    from harness.driver.http import HTTPTargetConfig


class MessagesRequest:
    def __init__(self, config: HTTPTargetConfig) -> None:
        self.config, self.shared = config, SharedFields(config)

    def headers(self) -> dict[str, str]:
        c = self.config
        headers = {"anthropic-version": c.anthropic_version}
        if c.api_key:
            headers["x-api-key"] = c.api_key
            headers["Authorization"] = f"Bearer {c.api_key}"
        return headers

    def decoder(self, keep_text: bool) -> StreamDecoder:
        return MessagesDecoder(keep_text=keep_text)

    def finished(self, req: RequestSpec, dec: StreamDecoder) -> None:
        pass

    def body(self, req: RequestSpec) -> dict:
        c = self.config
        system, messages = to_messages(req.messages or [])
        if c.cache_control and c.cache_rules.kind != "anthropic":
            cache_breakpoints(system, messages)
        n = output_length(req)
        body: dict = {"model": c.model, "max_tokens": n, "stream": True}
        if system:
            body["system"] = system
        tools = to_tools(req.tools)
        if tools:
            body["tools"] = tools
        body["messages"] = messages
        c.cache_rules.mark_messages(body)
        return body | self.shared(req, n)

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        return (orjson.dumps(self.body(req)),)
