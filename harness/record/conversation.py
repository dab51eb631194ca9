"""A captured request's conversation, in one form whatever the API it came in.

Each API's body becomes OpenAI chat form, the way vLLM turns the Anthropic Messages and OpenAI
Responses APIs into chat requests before rendering them (and `harness serve` does:
`harness/serving/agent_requests.py`): tools as `{"type": "function", "function": {name,
description, parameters}}`; a system prompt (Messages' `system`, Responses' `instructions`) as
the first message; assistant `tool_use` / `function_call` as `tool_calls`; `tool_result` /
`function_call_output` as `tool` messages; text blocks as content parts; thinking as assistant
text. What has no text (images, documents, encrypted reasoning) is counted in `dropped`, not
kept. A `/v1/completions` prompt is one user message (token-id prompts: `token_ids`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# Request paths by API, matched on the path's end (a proxy may sit under a prefix).
API_PATHS = {
    "/chat/completions": "chat",
    "/completions": "completions",
    "/messages": "messages",
    "/responses": "responses",
}


def api_of(path: str) -> str | None:
    """The API a request path is for, or None (forwarded, not recorded)."""
    path = path.rstrip("/")
    for end, api in API_PATHS.items():
        if path.endswith(end):
            return api
    return None


@dataclass
class Conversation:
    """One request's prompt in chat form, and what else the recording keeps of the request."""

    api: str
    tools: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)  # content: a list of text parts
    token_ids: list[int] | None = None  # a completions prompt given as token ids
    model: str | None = None
    stream: bool = False
    max_tokens: int | None = None
    previous_response_id: str | None = None  # Responses: the history the server keeps
    dropped: Counter = field(default_factory=Counter)  # parts with no text, by type


class BadBody(ValueError):
    """A body the recorder cannot read as its API's request (forwarded all the same)."""


def parse(api: str, body: Any) -> Conversation:
    if not isinstance(body, dict):
        raise BadBody("the body is not a JSON object")
    conv = Conversation(api, model=_str(body.get("model")), stream=body.get("stream") is True)
    {"chat": _chat, "completions": _completions, "messages": _messages, "responses": _responses}[
        api
    ](body, conv)
    return conv


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- OpenAI chat and completions ----------------------------------------------------------------


def _chat(body: dict, conv: Conversation) -> None:
    conv.max_tokens = _int(body.get("max_completion_tokens")) or _int(body.get("max_tokens"))
    conv.tools = [_chat_tool(t) for t in _list(body.get("tools")) if isinstance(t, dict)]
    for m in _list(body.get("messages")):
        if not isinstance(m, dict):
            raise BadBody("a message is not an object")
        msg: dict[str, Any] = {"role": m.get("role") or "user"}
        msg["content"] = _parts(m.get("content"), conv.dropped)
        calls = [_openai_call(c) for c in _list(m.get("tool_calls")) if isinstance(c, dict)]
        if calls:
            msg["tool_calls"] = calls
        if isinstance(m.get("tool_call_id"), str):
            msg["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("reasoning_content"), str) and m["reasoning_content"]:
            msg["content"].insert(0, m["reasoning_content"])
        conv.messages.append(msg)


def _completions(body: dict, conv: Conversation) -> None:
    conv.max_tokens = _int(body.get("max_tokens"))
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, list) and all(_int(i) is not None for i in prompt):
        conv.token_ids = list(prompt)
        conv.messages = [{"role": "user", "content": []}]
    elif isinstance(prompt, str):
        conv.messages = [{"role": "user", "content": [prompt]}]
    else:
        raise BadBody("'prompt' is not a text or a list of token ids")


def _chat_tool(tool: dict) -> dict:
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        return {"type": "function", "function": tool["function"]}
    return {"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}


def _openai_call(call: dict) -> dict:
    function: dict = call["function"] if isinstance(call.get("function"), dict) else call
    args = function.get("arguments")
    return {
        "id": _str(call.get("id")) or _str(call.get("call_id")) or "",
        "name": _str(function.get("name")) or "",
        "arguments": args if isinstance(args, str) else json.dumps(args or {}),
    }


def _parts(content: Any, dropped: Counter) -> list[str]:
    """A content (a string, or a list of parts) as its text parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    out = []
    for part in _list(content):
        text = _part_text(part)
        if text is None:
            dropped[part.get("type", "?") if isinstance(part, dict) else "?"] += 1
        else:
            out.append(text)
    return out


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    for key in ("text", "thinking", "refusal"):
        if isinstance(part.get(key), str):
            return part[key]
    return None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


# ---- Anthropic Messages -------------------------------------------------------------------------


def _messages(body: dict, conv: Conversation) -> None:
    conv.max_tokens = _int(body.get("max_tokens"))
    conv.tools = [_messages_tool(t) for t in _list(body.get("tools")) if isinstance(t, dict)]
    system = body.get("system")
    if system:
        conv.messages.append({"role": "system", "content": _parts(system, conv.dropped)})
    for m in _list(body.get("messages")):
        if not isinstance(m, dict):
            raise BadBody("a message is not an object")
        conv.messages += _messages_turn(m, conv.dropped)


def _messages_tool(tool: dict) -> dict:
    function: dict[str, Any] = {"name": tool.get("name") or tool.get("type") or ""}
    if "description" in tool:
        function["description"] = tool["description"]
    function["parameters"] = tool.get("input_schema") or {}
    return {"type": "function", "function": function}


def _messages_turn(m: dict, dropped: Counter) -> list[dict]:
    """One Messages turn: its tool results as `tool` messages first, then the turn itself."""
    role, content = m.get("role") or "user", m.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": [content]}]
    results, texts, calls = [], [], []
    for block in _list(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": _str(block.get("tool_use_id")) or "",
                    "content": _parts(block.get("content"), dropped),
                }
            )
        elif kind in ("tool_use", "server_tool_use"):
            name, args = _str(block.get("name")) or "", json.dumps(block.get("input") or {})
            calls.append({"id": _str(block.get("id")) or "", "name": name, "arguments": args})
        elif (text := _part_text(block)) is not None:
            texts.append(text)
        else:
            dropped[kind or "?"] += 1
    turn: dict[str, Any] = {"role": role, "content": texts}
    if calls:
        turn["tool_calls"] = calls
    return results + ([turn] if texts or calls or not results else [])


# ---- OpenAI Responses ---------------------------------------------------------------------------


def _responses(body: dict, conv: Conversation) -> None:
    conv.max_tokens = _int(body.get("max_output_tokens"))
    conv.previous_response_id = _str(body.get("previous_response_id"))
    conv.tools = [_chat_tool(t) for t in _list(body.get("tools")) if isinstance(t, dict)]
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        conv.messages.append({"role": "system", "content": [body["instructions"]]})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in _list(items):
        if isinstance(item, dict):
            response_item(item, conv.messages, conv.dropped)


def response_item(item: dict, out: list[dict], dropped: Counter) -> None:
    """One Responses item (of a request's input or a response's output) into chat messages."""
    kind = item.get("type", "message")
    if kind == "function_call":
        call = _openai_call(item)
        last = out[-1] if out and out[-1]["role"] == "assistant" else None
        if last is None:
            last = {"role": "assistant", "content": []}
            out.append(last)
        last.setdefault("tool_calls", []).append(call)
    elif kind == "function_call_output":
        output = item.get("output")
        content = _parts(output, dropped) if not isinstance(output, str) else [output]
        out.append(
            {"role": "tool", "tool_call_id": _str(item.get("call_id")) or "", "content": content}
        )
    elif kind == "message":
        out.append(
            {"role": item.get("role") or "user", "content": _parts(item.get("content"), dropped)}
        )
    elif kind == "reasoning" and _list(item.get("summary")):
        texts = [t for s in item["summary"] if (t := _part_text(s)) is not None]
        out.append({"role": "assistant", "content": texts})
    else:
        dropped[kind] += 1
