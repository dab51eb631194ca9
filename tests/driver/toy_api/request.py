"""The Toy API's request form: token-id bodies, the key as a bearer token, its decoder."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import orjson

from harness.driver.target import RequestSpec
from tests.driver.toy_api.decode import ToyDecoder

if TYPE_CHECKING:  # the API wing imports nothing of the HTTP transport at run time
    from harness.driver.http import HTTPTargetConfig


class ToyRequest:
    def __init__(self, config: HTTPTargetConfig) -> None:
        self.config = config

    def headers(self) -> dict[str, str]:
        key = self.config.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def decoder(self, keep_text: bool) -> ToyDecoder:
        return ToyDecoder(keep_text=keep_text)

    def finished(self, req: RequestSpec, dec: ToyDecoder) -> None:
        pass

    def body(self, req: RequestSpec) -> dict:
        p = req.prompt
        tokens = p.tolist() if isinstance(p, np.ndarray) else list(p or [])
        n = max(1, req.max_tokens)
        return {"model": self.config.model, "tokens": tokens, "limit": n, "stream": True}

    def encode(self, req: RequestSpec) -> tuple[bytes | memoryview, ...]:
        return (orjson.dumps(self.body(req)),)
