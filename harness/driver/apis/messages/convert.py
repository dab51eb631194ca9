"""OpenAI chat messages and tools in Anthropic Messages form.

- system (and developer) messages become the top-level `system`: a list of text blocks;
- user text becomes text blocks; an assistant turn its text and one `tool_use` block per tool
  call (`input`: the call's JSON arguments, parsed); a `tool` message a `tool_result` block in a
  user turn;
- consecutive turns of one role merge into one (Anthropic requires the roles to alternate: the
  results of parallel tool calls, and text after them, form one user turn);
- tools `{"type": "function", "function": {name, description, parameters}}` become
  `{name, description, input_schema}`.

`cache_breakpoints` marks the blocks Claude Code marks with `cache_control`: the system
prompt's last block and the last block of each of the last two turns (Anthropic caches the
prefix up to each breakpoint; at most four per request).
"""

from __future__ import annotations

import orjson

EPHEMERAL = {"type": "ephemeral"}
_SYSTEM_ROLES = ("system", "developer")


def to_messages(chat: list[dict]) -> tuple[list[dict], list[dict]]:
    """`(system blocks, messages)` of a chat message list."""
    system: list[dict] = []
    turns: list[dict] = []
    for message in chat:
        role = message["role"]
        if role in _SYSTEM_ROLES:
            system += text_blocks(message.get("content"))
            continue
        role, blocks = _turn(message)
        if not blocks:
            continue  # Anthropic rejects empty content
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _turn(message: dict) -> tuple[str, list[dict]]:
    role = message["role"]
    if role == "tool":
        result = {
            "type": "tool_result",
            "tool_use_id": message.get("tool_call_id") or "",
            "content": text_of(message.get("content")),
        }
        return "user", [result]
    blocks = text_blocks(message.get("content"))
    if role == "assistant":
        blocks += [tool_use(call) for call in message.get("tool_calls") or ()]
        return "assistant", blocks
    return "user", blocks


def tool_use(call: dict) -> dict:
    function = call.get("function") or {}
    return {
        "type": "tool_use",
        "id": call.get("id") or "",
        "name": function.get("name") or "",
        "input": _arguments(function.get("arguments")),
    }


def _arguments(arguments: object) -> dict:
    """A tool call's arguments as an object (`input` must be one); text that is not a JSON
    object is kept under "arguments"."""
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = orjson.loads(arguments or "{}")  # type: ignore[arg-type]
    except (orjson.JSONDecodeError, TypeError):
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def text_blocks(content: object) -> list[dict]:
    """Chat content (a string, or a list of parts) as text blocks, empty text left out."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [
            {"type": "text", "text": part["text"]}
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and part.get("text")
        ]
    return []


def text_of(content: object) -> str:
    """Chat content as one string (a list's text parts joined)."""
    if isinstance(content, str):
        return content
    return "".join(block["text"] for block in text_blocks(content))


def to_tools(tools: list[dict] | None) -> list[dict] | None:
    """OpenAI chat tool schemas as Anthropic tools."""
    if not tools:
        return None
    out = []
    for tool in tools:
        function = tool.get("function") or tool
        schema = {
            "type": "object",
            **(function.get("parameters") or {}),
        }  # a copy: never edit theirs
        entry = {"name": function["name"], "input_schema": schema}
        if function.get("description"):
            entry["description"] = function["description"]
        out.append(entry)
    return out


def cache_breakpoints(system: list[dict], turns: list[dict]) -> None:
    """`cache_control` on the system prompt's last block and on the last block of each of the
    last two turns, in place (the blocks are this request's own copies)."""
    marked = [system] if system else []
    marked += [turn["content"] for turn in turns[-2:]]
    for blocks in marked:
        blocks[-1] = {**blocks[-1], "cache_control": EPHEMERAL}
