"""The chat template: OpenAI messages -> one token-id prompt.

    <|system|> text <|end|> <|user|> text <|end|> <|assistant|> text <|end|> ... <|assistant|>

Each message is its role marker, its content's ids, and <|end|>; the generation prompt is a bare
<|assistant|>. Tool schemas (`tools`) open the prompt as <|tools|> json <|end|>, and an assistant
message's tool calls follow its text as <|tool_call|> json each, so an agent's tools and calls
take up prompt tokens and cache as they would on a real server (the model itself never calls a
tool). Nothing depends on what comes later (no BOS, no "last message" special case), so
the prompt of turn k is a prefix of turn k+1's (its messages + the assistant reply + the new user
message): the property that lets a prefix cache serve chat.
"""

from __future__ import annotations

import json

from harness.errors import ChatTemplateError
from harness.serving.tokenizer import (
    ASSISTANT_ID,
    END_ID,
    SYSTEM_ID,
    TOOL_CALL_ID,
    TOOL_ID,
    TOOLS_ID,
    USER_ID,
    Tokenizer,
)

ROLE_IDS = {
    "system": SYSTEM_ID,
    "developer": SYSTEM_ID,  # OpenAI's newer name for system instructions
    "user": USER_ID,
    "assistant": ASSISTANT_ID,
    "tool": TOOL_ID,
}


def chat_prompt_ids(messages: object, tokenizer, tools: object = None) -> list[int]:
    """The prompt in the tokenizer's chat format: a model's own (gemma_text.py) or this one."""
    if hasattr(tokenizer, "chat_prompt"):
        return tokenizer.chat_prompt(messages, tools)
    return apply_chat_template(messages, tokenizer, tools=tools)


def apply_chat_template(
    messages: object,
    tokenizer: Tokenizer,
    *,
    tools: object = None,
    add_generation_prompt: bool = True,
) -> list[int]:
    if not isinstance(messages, list) or not messages:
        raise ChatTemplateError(
            "'messages' must be a non-empty array of message objects", "messages"
        )
    ids: list[int] = []
    if tools:
        ids += [TOOLS_ID, *tokenizer.encode(tools_text(tools)), END_ID]
    for k, message in enumerate(messages):
        role, text = role_and_text(message, f"messages[{k}]")
        ids.append(ROLE_IDS[role])
        ids.extend(tokenizer.encode(text))
        for call in tool_calls(message, f"messages[{k}].tool_calls"):
            ids += [TOOL_CALL_ID, *tokenizer.encode(call)]
        ids.append(END_ID)
    if add_generation_prompt:
        ids.append(ASSISTANT_ID)
    return ids


def role_and_text(message: object, where: str) -> tuple[str, str]:
    if not isinstance(message, dict):
        raise ChatTemplateError(f"{where} must be an object", where)
    role = message.get("role")
    if role not in ROLE_IDS:
        roles = ", ".join(ROLE_IDS)
        raise ChatTemplateError(
            f"{where}.role must be one of {roles}; got {role!r}", f"{where}.role"
        )
    return role, _content_text(message.get("content"), f"{where}.content", role)


def tools_text(tools: object) -> str:
    """Tool schemas as canonical JSON: their tokens count and cache as on a real server."""
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise ChatTemplateError("'tools' must be an array of tool objects", "tools")
    return "\n".join(_canonical_json(t) for t in tools)


def tool_calls(message: dict, where: str) -> list[str]:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if (
        message.get("role") != "assistant"
        or not isinstance(calls, list)
        or not all(isinstance(c, dict) for c in calls)
    ):
        raise ChatTemplateError(
            f"{where} must be an array of tool calls on an assistant message", where
        )
    return [_canonical_json(c.get("function", c)) for c in calls]


def _canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _content_text(content: object, where: str, role: str) -> str:
    """A string, or OpenAI content parts of type "text" joined as they are."""
    if isinstance(content, str):
        return content
    if content is None and role == "assistant":
        return ""  # an assistant message that only carried tool calls
    if isinstance(content, list):
        texts = []
        for k, part in enumerate(content):
            if not (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                raise ChatTemplateError(
                    f'{where}[{k}] must be a text part {{"type": "text", "text": ...}}; '
                    "this engine reads text only",
                    f"{where}[{k}]",
                )
            texts.append(part["text"])
        return "\n".join(texts)  # as vLLM joins text parts
    raise ChatTemplateError(f"{where} must be a string or an array of text parts", where)
