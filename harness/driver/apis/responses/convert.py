"""OpenAI chat messages and tools as OpenAI Responses input items.

- the leading system (or developer) message becomes `instructions` (Codex sends its system
  prompt there; the Responses API does not carry instructions over from a previous response,
  so they are sent again each turn); a later one stays an input message;
- user and assistant text become message items (`{"type": "message", "role", "content"}`);
- an assistant's tool calls become `function_call` items after its text (`call_id`, `name`,
  `arguments`: the JSON text as the chat message had it); a `tool` message a
  `function_call_output` item (`call_id`, `output`);
- tools `{"type": "function", "function": {...}}` become `{"type": "function", name,
  description, parameters}`.
"""

from __future__ import annotations

from harness.driver.apis.messages.convert import text_of

_SYSTEM_ROLES = ("system", "developer")


def to_input(chat: list[dict]) -> tuple[str | None, list[dict]]:
    """`(instructions, input items)` of a chat message list."""
    instructions = None
    if chat and chat[0]["role"] in _SYSTEM_ROLES:
        instructions, chat = text_of(chat[0].get("content")), chat[1:]
    items: list[dict] = []
    for message in chat:
        items += input_items(message)
    return instructions, items


def input_items(message: dict) -> list[dict]:
    """The input items of one chat message."""
    role = message["role"]
    if role == "tool":
        output = text_of(message.get("content"))
        return [
            {"type": "function_call_output", "call_id": message["tool_call_id"], "output": output}
        ]
    text = text_of(message.get("content"))
    items = [{"type": "message", "role": role, "content": text}] if text else []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id") or "",
                "name": function.get("name") or "",
                "arguments": function.get("arguments") or "{}",
            }
        )
    return items


def to_tools(tools: list[dict] | None) -> list[dict] | None:
    """OpenAI chat tool schemas as Responses function tools."""
    if not tools:
        return None
    out = []
    for tool in tools:
        function = tool.get("function") or tool
        entry = {"type": "function", "name": function["name"]}
        if function.get("description"):
            entry["description"] = function["description"]
        entry["parameters"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(entry)
    return out
