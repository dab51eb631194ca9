"""The OpenAI protocol's requests: bodies -> validated `ApiRequest`s; OpenAI-style errors.

Validation happens here, at the edge, so the engine sees only typed, in-range values. Fields the
engine cannot honour faithfully (n > 1, logprobs, echo, best_of, suffix, structured output) are
a 400 rather than silently ignored; fields that do not change the output (user, seed,
top_p, tool_choice, ...) are accepted and ignored, as vLLM does. Tool schemas and tool calls are
rendered into the prompt by the chat template.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from harness.errors import ChatTemplateError, HarnessError
from harness.serving.async_engine import SamplingParams
from harness.serving.chat_template import chat_prompt_ids
from harness.serving.tokenizer import Tokenizer

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's (and vLLM's) default for /v1/completions


class ApiError(HarnessError):
    """An HTTP error with an OpenAI-style body: {"error": {message, type, param, code}}."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = (
            status,
            message,
            param,
            code,
            type,
        )

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


@dataclass(frozen=True)
class ServedModel:
    name: str
    max_model_len: int
    vocab_size: int
    kv_cache_tokens: int  # what the device KV cache holds: one request can never exceed it


@dataclass(frozen=True)
class ApiRequest:
    chat: bool
    prompt_ids: list[int]
    params: SamplingParams
    stream: bool
    include_usage: bool  # stream_options.include_usage: a final chunk with usage
    continuous_usage: bool  # stream_options.continuous_usage_stats (vLLM): usage on every chunk
    return_token_ids: bool  # vLLM's extension: the prompt's and the output's ids in the response
    # SGLang's extension: `sglext.cached_tokens_details`, cached tokens by tier
    return_cached_tokens_details: bool = False
    stop: tuple[str, ...] = ()  # stop strings: the text ends before the first one found


def parse_json(raw: bytes) -> dict:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad(f"We could not parse the JSON body of your request: {exc}") from exc
    if not isinstance(body, dict):
        raise bad("The request body must be a JSON object")
    return body


def parse_completion(body: dict, model: ServedModel, tokenizer: Tokenizer) -> ApiRequest:
    check_model(body, model)
    prompt_ids = _prompt_ids(body.get("prompt"), model, tokenizer)
    return _request(body, model, prompt_ids, chat=False)


def parse_chat(body: dict, model: ServedModel, tokenizer: Tokenizer) -> ApiRequest:
    check_model(body, model)
    if "messages" not in body:
        raise bad("Missing required parameter: 'messages'", "messages")
    try:
        prompt_ids = chat_prompt_ids(body["messages"], tokenizer, tools=body.get("tools"))
    except ChatTemplateError as exc:
        raise bad(str(exc), exc.param) from exc
    return _request(body, model, prompt_ids, chat=True)


def check_model(body: dict, model: ServedModel) -> None:
    name = body.get("model")
    if name is None:
        return  # as vLLM: the served model is the default
    if not isinstance(name, str):
        raise bad("'model' must be a string", "model")
    if name != model.name:
        raise ApiError(
            404,
            f"The model `{name}` does not exist. This server serves `{model.name}`.",
            param="model",
            code="model_not_found",
        )


def _prompt_ids(prompt: object, model: ServedModel, tokenizer: Tokenizer) -> list[int]:
    """A text, a list of ids, or a batch of exactly one of either."""
    if prompt is None:
        raise bad("Missing required parameter: 'prompt'", "prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(p, (list, str)) for p in prompt):
        if len(prompt) != 1:
            raise bad(
                f"a batch of {len(prompt)} prompts: this server takes one prompt per request",
                "prompt",
            )
        prompt = prompt[0]
    if isinstance(prompt, str):  # a model's own tokenizer may open with <bos> (as vLLM adds it)
        ids = (
            tokenizer.prompt_ids(prompt)
            if hasattr(tokenizer, "prompt_ids")
            else tokenizer.encode(prompt)
        )
    elif isinstance(prompt, list) and all(type(i) is int for i in prompt):
        ids = prompt
    else:
        raise bad(
            "'prompt' must be a string, an array of token ids, or an array of one of either",
            "prompt",
        )
    if not ids:
        raise bad("The prompt is empty", "prompt")
    bad_ids = [i for i in ids if not 0 <= i < model.vocab_size]
    if bad_ids:
        raise bad(
            f"token id {bad_ids[0]} is outside the vocabulary (0..{model.vocab_size - 1})", "prompt"
        )
    return ids


def _request(body: dict, model: ServedModel, prompt_ids: list[int], *, chat: bool) -> ApiRequest:
    _reject_unsupported(body)
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream):
        raise bad(
            "'stream_options' must be an object, and is only allowed with 'stream': true",
            "stream_options",
        )
    options = options or {}
    return ApiRequest(
        chat=chat,
        prompt_ids=prompt_ids,
        params=_sampling_params(body, model, len(prompt_ids), chat=chat),
        stream=stream,
        include_usage=_bool(options, "include_usage", False, "stream_options.include_usage"),
        continuous_usage=_bool(
            options, "continuous_usage_stats", False, "stream_options.continuous_usage_stats"
        ),
        return_token_ids=_bool(body, "return_token_ids", False),
        return_cached_tokens_details=_bool(body, "return_cached_tokens_details", False),
        stop=_stop_strings(body),
    )


def _sampling_params(
    body: dict, model: ServedModel, prompt_len: int, *, chat: bool
) -> SamplingParams:
    room = model.max_model_len - prompt_len
    if room <= 0:
        raise bad(
            f"This model's maximum context length is {model.max_model_len} tokens. However, your "
            f"prompt has {prompt_len} tokens, leaving no room for a completion.",
            "messages" if chat else "prompt",
        )
    name = (
        "max_completion_tokens"
        if chat and body.get("max_completion_tokens") is not None
        else "max_tokens"
    )
    # chat's default is "the rest of the context", as vLLM's, but never more than the cache holds
    default = (
        max(1, min(room, model.kv_cache_tokens - prompt_len))
        if chat
        else COMPLETION_DEFAULT_MAX_TOKENS
    )
    max_tokens = _int(body, name, default, minimum=1)
    if max_tokens > room:
        raise bad(
            f"This model's maximum context length is {model.max_model_len} tokens. However, you "
            f"requested {prompt_len + max_tokens} tokens ({prompt_len} in the prompt, "
            f"{max_tokens} in the completion). Please reduce the prompt or the completion.",
            name,
        )
    min_tokens = _int(body, "min_tokens", 0, minimum=0)
    if min_tokens > max_tokens:
        raise bad(
            f"'min_tokens' ({min_tokens}) must be at most '{name}' ({max_tokens})", "min_tokens"
        )
    return SamplingParams(
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=_bool(body, "ignore_eos", False),
        temperature=_temperature(body),
        stop_token_ids=_stop_token_ids(body, model),
    )


def _reject_unsupported(body: dict) -> None:
    limits = (("n", 1), ("best_of", 1))
    for name, most in limits:
        value = body.get(name)
        if value is not None and (type(value) is not int or not 1 <= value <= most):
            raise bad(f"'{name}' must be 1: this server returns one choice per request", name)
    for name in ("logprobs", "top_logprobs", "echo", "suffix"):
        if body.get(name) not in (None, False, 0):
            raise bad(f"'{name}' is not supported by the reference engine", name)
    if body.get("response_format") not in (None, {"type": "text"}):
        raise bad(
            "'response_format' other than text is not supported by the reference engine",
            "response_format",
        )


def _stop_strings(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if stops is None:
        return ()
    if not isinstance(stops, list) or not all(isinstance(x, str) and x for x in stops):
        raise bad("'stop' must be a non-empty string or an array of non-empty strings", "stop")
    return tuple(stops)


def _temperature(body: dict) -> float:
    value = body.get("temperature")
    if value is None:
        return 0.0
    if type(value) not in (int, float) or not 0 <= value <= 2:
        raise bad("'temperature' must be a number between 0 and 2", "temperature")
    return float(value)


def _stop_token_ids(body: dict, model: ServedModel) -> tuple[int, ...]:
    value = body.get("stop_token_ids")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        type(i) is int and 0 <= i < model.vocab_size for i in value
    ):
        raise bad(
            f"'stop_token_ids' must be an array of token ids in 0..{model.vocab_size - 1}",
            "stop_token_ids",
        )
    return tuple(value)


def _int(body: dict, name: str, default: int, *, minimum: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if type(value) is not int:
        raise bad(f"'{name}' must be an integer, got {type(value).__name__}", name)
    if value < minimum:
        raise bad(f"'{name}' must be at least {minimum}, got {value}", name)
    return value


def _bool(body: dict, name: str, default: bool, param: str | None = None) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(f"'{param or name}' must be a boolean", param or name)
    return value
