"""The body and headers of a Gemini request (`POST /v1beta/models/{model}:streamGenerateContent
?alt=sse`), from the RequestSpec's OpenAI chat messages and tools (convert.py).

Body: `systemInstruction`, `tools` (with `toolConfig.functionCallingConfig.mode` from
`target.tool_choice`: auto AUTO, required ANY, none NONE), `contents`, `generationConfig`
(`maxOutputTokens`; the sampling settings as `temperature`, `topP`, `topK`, `seed`). Nothing
else: Google refuses a field it does not know, so vLLM's `min_tokens` and `ignore_eos` are not
sent (the reply may stop before its length). The model is in the URL. Header: the key as
`x-goog-api-key`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from harness.driver.apis.gemini.convert import to_contents, to_tools
from harness.driver.apis.gemini.decode import GeminiDecoder
from harness.driver.apis.shared import output_length
from harness.driver.apis.stream import StreamDecoder
from harness.driver.target import RequestSpec

if TYPE_CHECKING:
    from harness.driver.http import HTTPTargetConfig

_SAMPLING = {"temperature": "temperature", "top_p": "topP", "top_k": "topK", "seed": "seed"}
_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


class GeminiRequest:
    def __init__(self, config: HTTPTargetConfig) -> None:
        self.config = config
        self._sampling = {_SAMPLING[k]: v for k, v in config.sampled().items()}

    def headers(self) -> dict[str, str]:
        key = self.config.api_key
        return {"x-goog-api-key": key} if key else {}

    def decoder(self, keep_text: bool) -> StreamDecoder:
        return GeminiDecoder(keep_text=keep_text)

    def finished(self, req: RequestSpec, dec: StreamDecoder) -> None:
        pass

    def body(self, req: RequestSpec) -> dict:
        system, contents = to_contents(req.messages or [])
        body: dict = {"systemInstruction": system} if system else {}
        tools = to_tools(req.tools)
        if tools:
            body["tools"] = tools
            if self.config.tool_choice is not None:
                mode = _MODES[self.config.tool_choice]
                body["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
        body["contents"] = contents
        body["generationConfig"] = {"maxOutputTokens": output_length(req), **self._sampling}
        return body

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        return (orjson.dumps(self.body(req)),)
