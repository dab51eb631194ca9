"""The fields every API's body shares: the forced output length, the sampling settings, the
session id in the body, SGLang's cached tokens by tier, a hosted cache's request fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.driver.target import RequestSpec

if TYPE_CHECKING:
    from harness.driver.http import HTTPTargetConfig


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
