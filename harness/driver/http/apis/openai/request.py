"""The bodies of OpenAI's `/v1/chat/completions` and `/v1/completions` requests, and the fields
every API's body shares (forced output length, the session id in the body)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import orjson

from harness.driver.http.apis.openai.decode import StreamDecoder
from harness.driver.target import RequestSpec

if TYPE_CHECKING:
    from harness.driver.http.config import HTTPTargetConfig


def output_length(req: RequestSpec) -> int:
    """The output tokens to ask for: servers reject 0, so a zero-output turn streams one."""
    return max(1, req.max_tokens)


class SharedFields:
    """The fields every API's body shares: the sampling settings in `c.api`'s fields (dumped
    once: they are the same for every request), vLLM's and SGLang's forced length
    (`min_tokens`, `ignore_eos`), the session id field, SGLang's cached tokens by tier."""

    __slots__ = ("config", "_sampled")

    def __init__(self, c: HTTPTargetConfig) -> None:
        self.config, self._sampled = c, c.sampled()

    def __call__(self, req: RequestSpec, n: int) -> dict:
        c, body = self.config, dict(self._sampled)
        if c.send_min_tokens:
            body["min_tokens"] = n
        if c.send_ignore_eos:
            body["ignore_eos"] = True
        if c.session_id_field:
            body[c.session_id_field] = req.sticky_key
        if c.cache_details:
            body["return_cached_tokens_details"] = True
        return body | c.cache_rules.request_fields(req.sticky_key)


class OpenAIRequest:
    """Chat (`messages`, `tools`) or completions (`prompt`: token ids or text) bodies."""

    def __init__(self, config: HTTPTargetConfig) -> None:
        self.config, self.shared = config, SharedFields(config)
        self.chat = config.api == "chat"

    def headers(self) -> dict[str, str]:
        key = self.config.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def decoder(self, keep_text: bool) -> StreamDecoder:
        return StreamDecoder(keep_text=keep_text)

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
