"""OpenAI chat messages and tools in Gemini's form (`Content`, `Part`, `FunctionDeclaration`).

- system (and developer) messages become `systemInstruction`: one text part each;
- user text becomes a `user` content of text parts; an assistant turn a `model` content of its
  text and one `functionCall` part per tool call (`name`, `args`: the arguments parsed, `id`);
  a `tool` message a `functionResponse` part (`name`: the call's, `response: {"output": text}`,
  `id`) in a `user` content;
- consecutive contents of one role merge into one (the results of parallel calls, and text
  after them, form one user content); empty text is left out (Gemini refuses empty parts);
- the first function call of each model turn carries `thoughtSignature:
  "skip_thought_signature_validator"`: Gemini 3 models refuse a call without the signature
  they gave it, and the trace's calls were never theirs (ai.google.dev, "Thought signatures",
  for history another model wrote);
- tools `{"type": "function", "function": {name, description, parameters}}` become one tool of
  `functionDeclarations` `{name, description, parametersJsonSchema}` (JSON Schema as it is).
"""

from __future__ import annotations

from harness.driver.apis.messages.convert import text_blocks, text_of, tool_use

SKIP_SIGNATURE = "skip_thought_signature_validator"
_SYSTEM_ROLES = ("system", "developer")


def to_contents(chat: list[dict]) -> tuple[dict | None, list[dict]]:
    """`(systemInstruction or None, contents)` of a chat message list."""
    system: list[dict] = []
    contents: list[dict] = []
    names: dict[str, str] = {}  # tool call id -> its function's name, for the responses
    for message in chat:
        if message["role"] in _SYSTEM_ROLES:
            system += text_parts(message.get("content"))
            continue
        role, parts = _content(message, names)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return ({"parts": system} if system else None), contents


def _content(message: dict, names: dict[str, str]) -> tuple[str, list[dict]]:
    role = message["role"]
    if role == "tool":
        call_id = message.get("tool_call_id") or ""
        name = names.get(call_id) or message.get("name") or ""
        response = {"name": name, "response": {"output": text_of(message.get("content"))}}
        return "user", [{"functionResponse": response | ({"id": call_id} if call_id else {})}]
    parts = text_parts(message.get("content"))
    if role != "assistant":
        return "user", parts
    calls = [function_call(call, names) for call in message.get("tool_calls") or ()]
    if calls:
        calls[0]["thoughtSignature"] = SKIP_SIGNATURE
    return "model", parts + calls


def function_call(call: dict, names: dict[str, str]) -> dict:
    """A chat tool call as a `functionCall` part (its name remembered by its id)."""
    use = tool_use(call)  # the arguments parsed into an object, as Anthropic's input
    names[use["id"]] = use["name"]
    called = {"name": use["name"], "args": use["input"]}
    return {"functionCall": called | ({"id": use["id"]} if use["id"] else {})}


def text_parts(content: object) -> list[dict]:
    """Chat content (a string, or a list of parts) as text parts, empty text left out."""
    return [{"text": block["text"]} for block in text_blocks(content)]


def to_tools(tools: list[dict] | None) -> list[dict] | None:
    """OpenAI chat tool schemas as one Gemini tool of function declarations."""
    if not tools:
        return None
    declarations = []
    for tool in tools:
        function = tool.get("function") or tool
        entry = {"name": function["name"]}
        if function.get("description"):
            entry["description"] = function["description"]
        entry["parametersJsonSchema"] = function.get("parameters") or {"type": "object"}
        declarations.append(entry)
    return [{"functionDeclarations": declarations}]
