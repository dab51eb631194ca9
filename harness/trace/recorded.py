"""Recorded prompts: a captured request's whole conversation, as references to its content.

A turn recorded by `harness record` carries its prompt (`Turn.prompt`) instead of the append
model's counts: the tool schemas, then each message in order (role, text parts, tool calls, the
call a tool result answers). Text is a chain of chunks, each a key and its token count; a tool
schema or a call's arguments is a JSON skeleton whose free-text strings are such chains. Equal
keys mean identical content (`harness record` keys each chunk by a keyed hash of its real text
and of the chunk before it), so every shared prefix survives, and the driver sends each chunk
as deterministic content of its length (`Content.segment_text`), or as the recorded text
itself when the recording kept it (`--keep-content`: a chunk's third element).

In the native file (docs/traces.md, "Recorded prompts") a session's prompts are written as
deltas: `keep` (leading messages equal to the previous turn's), the new `messages`, and `tools`
only where they changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Chunk = tuple[str, int] | tuple[str, int, str]  # key, tokens, and the real text when kept
LEAF = "$t"  # a stand-in string inside a JSON skeleton: {"$t": [chunks]}
ESCAPE = "$o"  # a real object whose only key is LEAF or ESCAPE: {"$o": {...}}
ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class Text:
    """A text as its chunks; their order is the text's."""

    chunks: tuple[Chunk, ...]

    @property
    def tokens(self) -> int:
        return sum(c[1] for c in self.chunks)

    @property
    def kept(self) -> bool:
        return bool(self.chunks) and len(self.chunks[0]) == 3


@dataclass(frozen=True, slots=True)
class Shaped:
    """A JSON value (a tool schema, a call's arguments) as one unit: its key and tokens, and the
    skeleton it is rebuilt from (free-text strings as `Text`, the rest as it was)."""

    key: str
    tokens: int
    skeleton: Any
    compact: bool = False  # written without spaces after separators (a call's arguments)
    text: str | None = None  # the real JSON text, when kept


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    name: str
    args: Shaped


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    parts: tuple[Text, ...] = ()
    calls: tuple[Call, ...] = ()
    call_id: str | None = None  # a tool result: the call it answers


@dataclass(frozen=True, slots=True)
class RecordedPrompt:
    tools: tuple[Shaped, ...]
    messages: tuple[Message, ...]

    @property
    def tokens(self) -> int:
        return sum(p[1] for p in pieces(self))


# ---- segments: what the ideal cache walks and the driver materializes ---------------------------


def chunk_key(chunk: Chunk) -> tuple:
    return ("rec", *chunk[::2]) if len(chunk) == 3 else ("rec", chunk[0])


def shaped_key(shaped: Shaped) -> tuple:
    return ("rec", shaped.key) if shaped.text is None else ("rec", shaped.key, shaped.text)


Piece = tuple[tuple, int, str, str | None]  # a segment's key, tokens, role and call


def pieces(prompt: RecordedPrompt) -> Iterator[Piece]:
    """The prompt's segments (`trace.segments.Segment`'s fields), in the order a template
    renders them: tools, then each message's text parts and tool calls."""
    for t in prompt.tools:
        yield shaped_key(t), t.tokens, "system", None
    for m in prompt.messages:
        role = "system" if m.role == "developer" else m.role
        for part in m.parts:
            for c in part.chunks:
                yield chunk_key(c), c[1], role, m.call_id
        for call in m.calls:
            yield shaped_key(call.args), call.args.tokens, "assistant", None


# ---- chat form: what a chat request sends ------------------------------------------------------

TextOf = Callable[[tuple, int, str], str]  # a segment's key, tokens and role -> its text


def text(part: Text, role: str, text_of: TextOf) -> str:
    """A text part: kept chunks are pieces of the real text (joined as they are); stand-in
    chunks are words (joined by a space, which content text's tokens leave implicit)."""
    texts = [text_of(chunk_key(c), c[1], role) for c in part.chunks if c[1] or part.kept]
    return ("" if part.kept else " ").join(texts)


def value(skeleton: Any, text_of: TextOf) -> Any:
    """A JSON skeleton with its stand-in strings written out."""
    if isinstance(skeleton, Text):
        return text(skeleton, "system", text_of)
    if isinstance(skeleton, dict):
        return {k: value(v, text_of) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [value(v, text_of) for v in skeleton]
    return skeleton


def arguments(args: Shaped, text_of: TextOf) -> str:
    if args.text is not None:
        return args.text
    separators = (",", ":") if args.compact else (", ", ": ")
    return json.dumps(value(args.skeleton, text_of), separators=separators, ensure_ascii=False)


def chat_messages(prompt: RecordedPrompt, text_of: TextOf, salt: str | None = None) -> list[dict]:
    """OpenAI chat messages; a salt opens the first system message (or is one of its own)."""
    out: list[dict] = []
    for m in prompt.messages:
        texts = [text(p, m.role, text_of) for p in m.parts]
        msg: dict[str, Any] = {"role": m.role}
        if len(texts) > 1:
            msg["content"] = [{"type": "text", "text": t} for t in texts]
        else:
            msg["content"] = texts[0] if texts else (None if m.calls else "")
        if m.calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": arguments(c.args, text_of)},
                }
                for c in m.calls
            ]
        if m.call_id is not None:
            msg["tool_call_id"] = m.call_id
        out.append(msg)
    if salt:
        _salted(out, salt)
    return out


def _salted(messages: list[dict], salt: str) -> None:
    first = messages[0] if messages else None
    if first is not None and first["role"] == "system" and isinstance(first["content"], str):
        first["content"] = f"{salt} {first['content']}" if first["content"] else salt
    else:
        messages.insert(0, {"role": "system", "content": salt})


def chat_tools(prompt: RecordedPrompt, text_of: TextOf) -> list[dict] | None:
    """The tool schemas in OpenAI chat form (as recorded), or None without tools."""
    if not prompt.tools:
        return None
    return [
        json.loads(t.text) if t.text is not None else value(t.skeleton, text_of)
        for t in prompt.tools
    ]


# ---- the native file: JSON objects, written as deltas per session ------------------------------


def text_obj(part: Text) -> list:
    return [list(c) for c in part.chunks]


def skeleton_obj(skeleton: Any) -> Any:
    if isinstance(skeleton, Text):
        return {LEAF: text_obj(skeleton)}
    if isinstance(skeleton, dict):
        obj = {k: skeleton_obj(v) for k, v in skeleton.items()}
        return {ESCAPE: obj} if len(obj) == 1 and next(iter(obj)) in (LEAF, ESCAPE) else obj
    if isinstance(skeleton, list):
        return [skeleton_obj(v) for v in skeleton]
    return skeleton


def shaped_obj(shaped: Shaped) -> dict:
    obj: dict[str, Any] = {"key": shaped.key, "n": shaped.tokens}
    if shaped.text is not None:
        obj["text"] = shaped.text
    else:
        obj["json"] = skeleton_obj(shaped.skeleton)
    if shaped.compact:
        obj["compact"] = True
    return obj


def message_obj(m: Message) -> dict:
    obj: dict[str, Any] = {"role": m.role}
    if m.parts:
        obj["parts"] = [text_obj(p) for p in m.parts]
    if m.calls:
        obj["calls"] = [{"id": c.id, "name": c.name, **shaped_obj(c.args)} for c in m.calls]
    if m.call_id is not None:
        obj["call_id"] = m.call_id
    return obj


def prompt_obj(prompt: RecordedPrompt, previous: RecordedPrompt | None) -> dict:
    """A turn's prompt as the delta from the previous turn's (None: the session's first)."""
    before = previous.messages if previous is not None else ()
    keep = 0
    while keep < min(len(before), len(prompt.messages)) and before[keep] == prompt.messages[keep]:
        keep += 1
    obj: dict[str, Any] = {
        "keep": keep,
        "messages": [message_obj(m) for m in prompt.messages[keep:]],
    }
    if prompt.tools != (previous.tools if previous is not None else ()):
        obj["tools"] = [shaped_obj(t) for t in prompt.tools]
    return obj


class RecordedFormatError(ValueError):
    """A recorded prompt that cannot be read: `field` is its dotted place in the turn's prompt."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _need(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise RecordedFormatError(field, message)


def text_from(obj: Any, where: str) -> Text:
    _need(isinstance(obj, list), where, "must be a list of chunks [key, tokens(, text)]")
    chunks = []
    for i, c in enumerate(obj):
        ok = isinstance(c, list) and len(c) in (2, 3) and isinstance(c[0], str)
        ok = ok and isinstance(c[1], int) and not isinstance(c[1], bool) and c[1] >= 0
        _need(
            ok and (len(c) == 2 or isinstance(c[2], str)),
            f"{where}[{i}]",
            "must be [key, tokens >= 0] or [key, tokens, text]",
        )
        chunks.append(tuple(c))
    _need(len({len(c) for c in chunks}) <= 1, where, "mixes kept and stand-in chunks")
    return Text(tuple(chunks))


def skeleton_from(obj: Any, where: str) -> Any:
    if isinstance(obj, dict):
        if len(obj) == 1 and LEAF in obj:
            return text_from(obj[LEAF], f"{where}.{LEAF}")
        if len(obj) == 1 and ESCAPE in obj and isinstance(obj[ESCAPE], dict):
            return {k: skeleton_from(v, f"{where}.{k}") for k, v in obj[ESCAPE].items()}
        return {k: skeleton_from(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, list):
        return [skeleton_from(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    return obj


def shaped_from(obj: Any, where: str) -> Shaped:
    _need(isinstance(obj, dict), where, "must be an object")
    key, n = obj.get("key"), obj.get("n")
    _need(isinstance(key, str), f"{where}.key", "must be a string")
    _need(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0,
        f"{where}.n",
        "must be an integer >= 0",
    )
    has_text = isinstance(obj.get("text"), str)
    _need(has_text != ("json" in obj), where, "needs exactly one of 'json' and 'text'")
    skeleton = None if has_text else skeleton_from(obj["json"], f"{where}.json")
    compact = obj.get("compact", False)
    _need(isinstance(compact, bool), f"{where}.compact", "must be true or false")
    return Shaped(key, n, skeleton, compact, obj["text"] if has_text else None)


_MESSAGE_KEYS = {"role", "parts", "calls", "call_id"}
_CALL_KEYS = {"id", "name", "key", "n", "json", "text", "compact"}


def message_from(obj: Any, where: str) -> Message:
    _need(isinstance(obj, dict), where, "must be an object")
    extra = set(obj) - _MESSAGE_KEYS
    _need(not extra, f"{where}.{min(extra) if extra else ''}", "is not a message field")
    _need(obj.get("role") in ROLES, f"{where}.role", f"must be one of {', '.join(ROLES)}")
    parts = obj.get("parts", [])
    _need(isinstance(parts, list), f"{where}.parts", "must be a list")
    calls = obj.get("calls", [])
    _need(isinstance(calls, list), f"{where}.calls", "must be a list")
    call_id = obj.get("call_id")
    _need(call_id is None or isinstance(call_id, str), f"{where}.call_id", "must be a string")
    return Message(
        role=obj["role"],
        parts=tuple(text_from(p, f"{where}.parts[{i}]") for i, p in enumerate(parts)),
        calls=tuple(_call_from(c, f"{where}.calls[{i}]") for i, c in enumerate(calls)),
        call_id=call_id,
    )


def _call_from(obj: Any, where: str) -> Call:
    _need(
        isinstance(obj, dict) and not set(obj) - _CALL_KEYS,
        where,
        f"must be an object of {', '.join(sorted(_CALL_KEYS))}",
    )
    for name in ("id", "name"):
        _need(isinstance(obj.get(name), str), f"{where}.{name}", "must be a string")
    return Call(obj["id"], obj["name"], shaped_from(obj, where))


def prompt_from(obj: Any, previous: RecordedPrompt | None, where: str) -> RecordedPrompt:
    """A turn's prompt from its delta object and the previous turn's prompt."""
    _need(
        isinstance(obj, dict) and not set(obj) - {"keep", "messages", "tools"},
        where,
        "must be an object of keep, messages and tools",
    )
    before = previous.messages if previous is not None else ()
    keep = obj.get("keep", 0)
    _need(
        isinstance(keep, int) and 0 <= keep <= len(before),
        f"{where}.keep",
        f"must be an integer from 0 to {len(before)} (the previous turn's messages)",
    )
    new = obj.get("messages", [])
    _need(isinstance(new, list), f"{where}.messages", "must be a list")
    messages = before[:keep] + tuple(
        message_from(m, f"{where}.messages[{i}]") for i, m in enumerate(new)
    )
    if "tools" in obj:
        _need(isinstance(obj["tools"], list), f"{where}.tools", "must be a list")
        tools = tuple(shaped_from(t, f"{where}.tools[{i}]") for i, t in enumerate(obj["tools"]))
    else:
        tools = previous.tools if previous is not None else ()
    return RecordedPrompt(tools, messages)


def walk_texts(prompt: RecordedPrompt) -> Iterator[Text]:
    """Every text of a prompt, tool schemas' and arguments' strings included."""

    def leaves(skeleton: Any) -> Iterator[Text]:
        if isinstance(skeleton, Text):
            yield skeleton
        elif isinstance(skeleton, dict):
            for v in skeleton.values():
                yield from leaves(v)
        elif isinstance(skeleton, list):
            for v in skeleton:
                yield from leaves(v)

    for t in prompt.tools:
        yield from leaves(t.skeleton)
    for m in prompt.messages:
        yield from m.parts
        for c in m.calls:
            yield from leaves(c.args.skeleton)


def prompts_obj(prompts: list[RecordedPrompt | None]) -> dict[str, dict]:
    """A session's prompts (one per turn, None for a turn without) as {turn index: delta}."""
    out, previous = {}, None
    for i, prompt in enumerate(prompts):
        if prompt is not None:
            out[str(i)] = prompt_obj(prompt, previous)
            previous = prompt
    return out


def prompts_from(obj: dict[str, Any], n: int) -> dict[int, RecordedPrompt]:
    """A session's prompts from `prompts_obj`'s form; `n` turns."""
    by_turn: dict[int, Any] = {}
    for key, delta in obj.items():
        _need(key.isdigit() and int(key) < n, key, f"is not a turn index below {n}")
        by_turn[int(key)] = delta
    out, previous = {}, None
    for i in sorted(by_turn):
        previous = out[i] = prompt_from(by_turn[i], previous, str(i))
    return out
