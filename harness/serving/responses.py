"""The OpenAI protocol's responses: engine outputs -> response bodies and SSE chunks.

Text is decoded incrementally (`DecodeStream`). Stop strings are matched on the decoded text, as
vLLM does: the text ends just before the first one, and while streaming the last few characters
are held back until they can no longer become the start of a stop string.
"""

from __future__ import annotations

import time
from typing import Any

from harness.serving.async_engine import RequestOutput
from harness.serving.protocol import ApiRequest
from harness.serving.tokenizer import Tokenizer


class StopStrings:
    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.hold = max((len(s) for s in stops), default=1) - 1  # chars that may still start a stop
        self.text = ""
        self.sent = 0
        self.stopped = False

    def feed(self, delta: str, final: bool) -> str:
        """Take decoded text; return what may be sent now (nothing once a stop was found)."""
        if self.stopped:
            return ""
        start = max(0, len(self.text) - self.hold)  # a stop ending in `delta` starts no earlier
        self.text += delta
        hits = [i for s in self.stops if (i := self.text.find(s, start)) >= 0]
        if hits:
            self.text, self.stopped = self.text[: min(hits)], True
        end = (
            len(self.text) if final or self.stopped else max(self.sent, len(self.text) - self.hold)
        )
        out, self.sent = self.text[self.sent : end], end
        return out


class ResponseBuilder:
    """Engine outputs -> OpenAI response bodies and stream chunks, for one request."""

    def __init__(
        self,
        request_id: str,
        api: ApiRequest,
        model_name: str,
        tokenizer: Tokenizer,
        *,
        storage_backend: str | None = None,
    ) -> None:
        self.request_id, self.api, self.model = request_id, api, model_name
        self.storage_backend = storage_backend  # SGLang's name of its L3 tier; None: no such tier
        self.created = int(time.time())
        self._decoder = tokenizer.decode_stream()
        self._stop_ids = {*tokenizer.stop_token_ids, *api.params.stop_token_ids}
        self._text = StopStrings(api.stop)
        self.token_ids: list[int] = []
        self.last: RequestOutput | None = None  # the latest output taken

    @property
    def stopped(self) -> bool:
        """A stop string ended the text: the request is done though the engine is not."""
        return self._text.stopped

    @property
    def text(self) -> str:
        """The text so far (what a stop string left of it)."""
        return self._text.text

    @property
    def done(self) -> bool:
        return self.stopped or (self.last is not None and self.last.finished)

    @property
    def finish_reason(self) -> str | None:
        if self.stopped:
            return "stop"
        last = self.last
        return last.finish_reason if last is not None and last.finished else None

    def add(self, out: RequestOutput) -> str:
        """Take one output; returns the text that may be sent for it."""
        ids = out.new_token_ids
        shown = ids
        if out.finished and out.finish_reason == "stop" and ids and ids[-1] in self._stop_ids:
            shown = ids[:-1]  # the stop token ends the text, it is not part of it (vLLM's default)
        text = "".join(self._decoder.push(i) for i in shown)
        if out.finished:
            text += self._decoder.flush()
        self.token_ids.extend(ids)
        self.last = out
        return self._text.feed(text, out.finished)

    def usage(self, out: RequestOutput) -> dict:
        return {
            "prompt_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens,
            "total_tokens": out.prompt_tokens + out.completion_tokens,
            "prompt_tokens_details": {
                "cached_tokens": out.cached_tokens,
                "cached_tokens_device": out.cached_tokens_device,  # our extensions, by tier
                "cached_tokens_cpu": out.cached_tokens_cpu,
                "cached_tokens_disk": out.cached_tokens_disk,
                "cached_tokens_remote": out.cached_tokens_remote,
            },
        }

    def sglext(self, out: RequestOutput) -> dict:
        """SGLang's form of the split (its `CachedTokensDetails`): device, host and, where an L3
        tier exists, storage (here disk and the shared store together) and its backend's name."""
        details: dict[str, Any] = {
            "device": out.cached_tokens_device,
            "host": out.cached_tokens_cpu,
        }
        if self.storage_backend is not None:
            details["storage"] = out.cached_tokens_disk + out.cached_tokens_remote
            details["storage_backend"] = self.storage_backend
        return {"cached_tokens_details": details}

    def response(self) -> dict:
        text = self._text.text
        if self.api.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        choice |= {"logprobs": None, "finish_reason": self.finish_reason}
        if self.api.return_token_ids:
            choice["token_ids"] = list(self.token_ids)
        body = self._envelope("chat.completion" if self.api.chat else "text_completion", [choice])
        if self.api.return_token_ids:
            body["prompt_token_ids"] = list(self.api.prompt_ids)
        assert self.last is not None  # the caller has taken the request's outputs first
        body["usage"] = self.usage(self.last)
        if self.api.return_cached_tokens_details:
            body["sglext"] = self.sglext(self.last)
        return body

    def opening_chunks(self) -> list[dict]:
        """Chat streams open with a role-only delta, as OpenAI's do."""
        if not self.api.chat:
            return []
        return [self._chunk({"role": "assistant", "content": ""}, None, None)]

    def chunks(self, out: RequestOutput) -> list[dict]:
        """The chunks for one engine output: its delta (with the finish reason on the last)."""
        text = self.add(out)
        delta = {"content": text} if self.api.chat else text
        chunks = [self._chunk(delta, self.finish_reason, out)]
        if self.api.return_token_ids:
            chunks[0]["choices"][0]["token_ids"] = list(out.new_token_ids)
        if self.done and self.api.return_cached_tokens_details:  # as SGLang: its own chunk
            chunks.append(self._envelope(self._chunk_object, []) | {"sglext": self.sglext(out)})
        if self.done and self.api.include_usage:
            chunks.append(self._envelope(self._chunk_object, []) | {"usage": self.usage(out)})
        return chunks

    @property
    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.api.chat else "text_completion"

    def _chunk(
        self, delta: dict | str, finish_reason: str | None, out: RequestOutput | None
    ) -> dict:
        choice: dict[str, Any] = (
            {"index": 0, "delta": delta} if self.api.chat else {"index": 0, "text": delta}
        )
        choice |= {"logprobs": None, "finish_reason": finish_reason}
        chunk = self._envelope(self._chunk_object, [choice])
        if self.api.continuous_usage and out is not None:
            chunk["usage"] = self.usage(out)
        elif self.api.include_usage:
            chunk["usage"] = None  # OpenAI sends null usage on every chunk but the last
        return chunk

    def _envelope(self, obj: str, choices: list[dict]) -> dict:
        return {
            "id": self.request_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
