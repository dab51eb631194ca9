"""Anthropic Messages, OpenAI Responses and Google Gemini request bodies -> the chat body they
stand for, as vLLM's own routes turn the first two into chat requests (its
`entrypoints/anthropic` and `entrypoints/openai/responses`), so the chat template renders the
same conversation:

- Messages: `system` (a string or text blocks, joined) -> the system message; text blocks ->
  content (one block: its text); `tool_use` -> assistant `tool_calls` (arguments: the input as
  JSON); a user turn's `tool_result` blocks -> `tool` messages before the turn's text; tools
  `{name, description, input_schema}` -> chat tools; `max_tokens`, `stop_sequences`.
- Responses: `instructions` -> the system message; message items -> messages; `function_call`
  -> `tool_calls` of the assistant message before it (or a new one); `function_call_output` ->
  a `tool` message; tools `{type: function, name, ...}` -> chat tools; `max_output_tokens`.
- Gemini: `systemInstruction` parts -> the system message; `user` / `model` contents ->
  user / assistant messages (text parts joined as Messages' blocks are); `functionCall` parts
  -> the assistant's `tool_calls` (arguments: the args as JSON); `functionResponse` parts ->
  `tool` messages before the content's text (content: `response.output`, else the response as
  JSON); `functionDeclarations` -> chat tools; `generationConfig.maxOutputTokens`,
  `temperature`; the model is the URL's, streamed or not as the URL's method says.

Streamed or not, as the body asks (`stream`); usage is always reported, as the APIs always do.
"""

from __future__ import annotations

import json

from harness.serving.protocol import bad

_PASSED = ("model", "min_tokens", "ignore_eos", "temperature", "stop_token_ids")


def messages_chat_body(body: dict) -> dict:
    chat = _system(body.get("system"))
    for message in _list(body, "messages"):
        chat += _message(message)
    out = _common(body, chat, _tools(body.get("tools"), "input_schema"))
    out["max_tokens"] = body.get("max_tokens")
    if body.get("stop_sequences") is not None:
        out["stop"] = body["stop_sequences"]
    return out


def responses_chat_body(body: dict) -> dict:
    if body.get("previous_response_id") is not None:
        raise bad("previous_response_id: this server keeps no responses", "previous_response_id")
    chat = [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise bad("'input' must be a string or an array of items", "input")
    for item in items:
        _item(item, chat)
    out = _common(body, chat, _tools(body.get("tools"), "parameters"))
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    return out


def gemini_chat_body(body: dict, model: str, stream: bool) -> dict:
    system = (body.get("systemInstruction") or {}).get("parts") or []
    chat = _system([{"text": p.get("text") or ""} for p in system if isinstance(p, dict)])
    for content in _list(body, "contents"):
        chat += _gemini_turn(content)
    declared = [d for t in body.get("tools") or () for d in t.get("functionDeclarations") or ()]
    config = body.get("generationConfig") or {}
    passed = {"model": model, "stream": stream}
    if config.get("temperature") is not None:
        passed["temperature"] = config["temperature"]
    out = _common(passed, chat, _tools(declared, "parametersJsonSchema"))
    if config.get("maxOutputTokens") is not None:
        out["max_tokens"] = config["maxOutputTokens"]
    return out


def _common(body: dict, chat: list[dict], tools: list[dict] | None) -> dict:
    out = {k: body[k] for k in _PASSED if k in body}
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("'stream' must be true or false", "stream")
    out |= {"messages": chat, "stream": stream}
    if stream:
        out["stream_options"] = {"include_usage": True}
    if tools:
        out["tools"] = tools
    return out


def _list(body: dict, name: str) -> list:
    value = body.get(name)
    if not isinstance(value, list):
        raise bad(f"'{name}' must be an array", name)
    return value


def _system(system: object) -> list[dict]:
    if isinstance(system, list):
        system = "".join(b.get("text") or "" for b in system if isinstance(b, dict))
    return [{"role": "system", "content": system}] if isinstance(system, str) and system else []


def _message(message: dict) -> list[dict]:
    """One Messages turn as chat messages: tool results first, then the turn itself."""
    role, content = message.get("role"), message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise bad("a message's 'content' must be a string or an array of blocks", "messages")
    texts, calls, out = [], [], []
    for block in content:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            texts.append(block["text"])
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {})
            function = {"name": block.get("name") or "", "arguments": arguments}
            calls.append({"id": block.get("id") or "", "type": "function", "function": function})
        elif kind == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                result = "\n".join(b.get("text", "") for b in result if isinstance(b, dict))
            out.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": result or ""}
            )
    turn: dict = {"role": role}
    if texts:
        turn["content"] = (
            texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
        )
    if calls:
        turn["tool_calls"] = calls
    return out + [turn] if len(turn) > 1 else out


def _gemini_turn(content: dict) -> list[dict]:
    """One Gemini content as chat messages: function responses first, then the turn itself."""
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        raise bad("a content's 'parts' must be an array", "contents")
    blocks = []
    for part in content["parts"]:
        if part.get("text") and not part.get("thought"):
            blocks.append({"type": "text", "text": part["text"]})
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            name = call.get("name") or ""
            blocks.append({"type": "tool_use", "id": call.get("id") or name, "name": name,
                           "input": call.get("args") or {}})  # fmt: skip
        elif isinstance(part.get("functionResponse"), dict):
            reply = part["functionResponse"]
            response = reply.get("response")
            output = response.get("output") if isinstance(response, dict) else None
            text = output if isinstance(output, str) else json.dumps(response)
            blocks.append({"type": "tool_result", "tool_use_id": reply.get("id") or
                           reply.get("name"), "content": text})  # fmt: skip
    role = "assistant" if content.get("role") == "model" else "user"
    return _message({"role": role, "content": blocks})


def _item(item: dict, chat: list[dict]) -> None:
    kind = item.get("type", "message")
    last = chat[-1] if chat and chat[-1]["role"] == "assistant" else None
    if kind == "function_call":
        call = {
            "id": item.get("call_id") or "",
            "type": "function",
            "function": {
                "name": item.get("name") or "",
                "arguments": item.get("arguments") or "{}",
            },
        }
        if last is not None:
            last.setdefault("tool_calls", []).append(call)
        else:
            chat.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "function_call_output":
        chat.append(
            {
                "role": "tool",
                "tool_call_id": item.get("call_id"),
                "content": item.get("output") or "",
            }
        )
    elif kind == "message":
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text") or "" for p in content if isinstance(p, dict))
        chat.append({"role": item.get("role"), "content": content})
    else:
        raise bad(
            f"input items of type {kind!r} are not supported by the reference engine", "input"
        )


def _tools(tools: object, schema_key: str) -> list[dict] | None:
    if not isinstance(tools, list):
        return None
    out = []
    for tool in tools:
        function = {"name": tool.get("name"), "parameters": tool.get(schema_key) or {}}
        if tool.get("description"):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out
