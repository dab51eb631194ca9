"""Private stand-ins: a conversation's content as keyed hashes and token counts.

Every text (a message's text part, a tool result, a system prompt, a string inside a tool
schema or a call's arguments) is cut into chunks of `block_tokens` tokens; chunk i's key is
HMAC-SHA256(salt, key of chunk i-1 + its text), so two texts that share a prefix share the keys
of the chunks they have whole in common, identical texts get identical keys wherever they are,
and different texts different ones. The salt never enters the recording (its fingerprint
does, so two recordings can be told to share one). Without `keep`, the trace holds only keys and
token counts; the replay writes each chunk out as words of exactly its length
(`trace.content.Content`), so every token count and every shared prefix survives.

Kept as they are, because they are the agent's interface rather than its content: roles, tool
names, tool call ids, the keys of JSON objects and the schema words of tool schemas
(`SCHEMA_WORDS`: `type`, `required`, ...) and JSON's literals (true, false, null). Numbers in
call arguments become other numbers of as many digits.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.record.conversation import Conversation
from harness.trace.recorded import Call, Chunk, Message, RecordedPrompt, Shaped, Text

TokenEnds = Callable[[str], Sequence[int]]  # a text -> the end offset of each of its tokens
SCHEMA_WORDS = frozenset({"type", "required", "format", "$ref", "$schema", "strict", "name"})
KEY_HEX = 16  # 64-bit keys: collisions are negligible at any recording's size
CACHE = 4096  # texts and messages remembered (an agent re-sends its history every turn)


class Tokens:
    """A token counter by name (`TokenEnds`), built on first use where it is used: it travels
    to the writer's process as its maker and name."""

    def __init__(self, make: Callable[[str], TokenEnds], name: str) -> None:
        self.make, self.name = make, name
        self._ends: TokenEnds | None = None

    def __call__(self, text: str) -> Sequence[int]:
        if self._ends is None:
            self._ends = self.make(self.name)
        return self._ends(text)

    def __getstate__(self) -> dict:
        return {"make": self.make, "name": self.name}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["make"], state["name"])  # type: ignore[misc]


class StandIns:
    def __init__(
        self, salt: bytes, ends: TokenEnds, *, block_tokens: int = 64, keep: bool = False
    ) -> None:
        if block_tokens < 1:
            raise ValueError("block_tokens must be >= 1")
        self.salt, self.ends, self.block, self.keep = salt, ends, block_tokens, keep
        self._texts: OrderedDict[str, Text] = OrderedDict()
        self._messages: OrderedDict[str, tuple[Message, str]] = OrderedDict()

    def __getstate__(self) -> dict:  # what another process needs: no caches
        return {"salt": self.salt, "ends": self.ends, "block": self.block, "keep": self.keep}

    def __setstate__(self, s: dict) -> None:
        self.__init__(s["salt"], s["ends"], block_tokens=s["block"], keep=s["keep"])  # type: ignore[misc]

    @property
    def fingerprint(self) -> str:
        """Names the salt without revealing it: equal for recordings made with one salt."""
        return self.key(b"fingerprint")

    def key(self, *parts: bytes) -> str:
        return hmac.new(self.salt, b"\x00".join(parts), hashlib.sha256).hexdigest()[:KEY_HEX]

    def count(self, text: str) -> int:
        return len(self.ends(text))

    # ---- texts -----------------------------------------------------------------------------

    def text(self, text: str) -> Text:
        cached = self._texts.get(text)
        if cached is None:
            cached = self._remember(self._texts, text, self._chunks(text))
        return cached

    def _chunks(self, text: str) -> Text:
        ends, chunks, prev, start = self.ends(text), [], b"text", 0
        for i in range(0, len(ends), self.block):
            n = min(self.block, len(ends) - i)
            stop = len(text) if i + n >= len(ends) else ends[i + n - 1]
            piece = text[start:stop]
            k = self.key(prev, piece.encode())
            chunks.append((k, n, piece) if self.keep else (k, n))
            prev, start = k.encode(), stop
        if not ends and text and self.keep:  # text without tokens (blanks): kept as it is
            chunks.append((self.key(b"text", text.encode()), 0, text))
        return Text(tuple(chunks))

    def token_ids(self, ids: Sequence[int]) -> Text:
        chunks: list[Chunk] = []
        prev = b"ids"
        for i in range(0, len(ids), self.block):
            piece = ids[i : i + self.block]
            k = self.key(prev, ",".join(map(str, piece)).encode())
            chunks.append((k, len(piece)))
            prev = k.encode()
        return Text(tuple(chunks))

    @staticmethod
    def _remember(cache: OrderedDict, key: str, value: Any) -> Any:
        cache[key] = value
        if len(cache) > CACHE:
            cache.popitem(last=False)
        return value

    # ---- JSON: tool schemas and call arguments ----------------------------------------------

    def skeleton(self, obj: Any, kept: bool = False, schema: bool = False) -> Any:
        """`obj` with its strings as `Text` (a schema's words kept) and numbers re-drawn."""
        if isinstance(obj, dict):
            return {k: self._member(k, v, schema) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.skeleton(v, kept, schema) for v in obj]
        if isinstance(obj, str):
            return obj if kept else self.text(obj)
        if isinstance(obj, bool) or obj is None or schema:
            return obj
        if isinstance(obj, int | float):
            return self._number(obj)
        return obj

    def _member(self, key: str, value: Any, schema: bool) -> Any:
        if schema and key == "properties" and isinstance(value, dict):  # names of parameters
            return {name: self.skeleton(s, schema=True) for name, s in value.items()}
        return self.skeleton(value, schema and key in SCHEMA_WORDS, schema)

    def _number(self, x: int | float) -> int | float:
        """Another number of the same form: each digit re-drawn from the keyed hash."""
        text = repr(x)
        digits = self.key(b"number", text.encode())
        out = "".join(
            str(int(digits[i % KEY_HEX], 16) % 9 + 1) if c.isdigit() else c
            for i, c in enumerate(text)
        )
        return type(x)(out) if isinstance(x, int) else float(out)

    def shaped(self, obj: Any, domain: bytes, raw: str | None = None) -> Shaped:
        """A JSON value as one unit: keyed by its whole text, counted as that text."""
        raw = raw if raw is not None else json.dumps(obj, ensure_ascii=False)
        k, n = self.key(domain, raw.encode()), self.count(raw)
        if self.keep:
            return Shaped(k, n, None, text=raw)
        compact = raw == json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
        return Shaped(k, n, self.skeleton(obj, schema=domain == b"tool"), compact)

    def tool(self, tool: dict) -> Shaped:
        return self.shaped(tool, b"tool")

    def call(self, call: dict) -> Call:
        raw = call["arguments"]
        try:
            args = json.loads(raw)
        except ValueError:
            args = raw  # not JSON (a model's slip): a string stands in for it
        domain = b"call\x00" + call["id"].encode() + b"\x00" + call["name"].encode()
        return Call(call["id"], call["name"], self.shaped(args, domain, raw))

    # ---- messages and prompts ---------------------------------------------------------------

    def message(self, msg: dict) -> tuple[Message, str]:
        """A chat-form message (`record.conversation`) and its key (its identity in a context)."""
        raw = json.dumps(msg, sort_keys=True, ensure_ascii=False)
        cached = self._messages.get(raw)
        if cached is None:
            message = Message(
                role=msg["role"] if msg["role"] in _ROLES else "user",
                parts=tuple(self.text(t) for t in msg.get("content") or []),
                calls=tuple(self.call(c) for c in msg.get("tool_calls") or []),
                call_id=msg.get("tool_call_id"),
            )
            cached = self._remember(self._messages, raw, (message, self.key(b"msg", raw.encode())))
        return cached

    def prompt(self, conv: Conversation) -> tuple[RecordedPrompt, list[str]]:
        """The conversation's recorded prompt, and its context: the tools' key, then each
        message's (what session reconstruction compares)."""
        tools = tuple(self.tool(t) for t in conv.tools)
        pairs = [self.message(m) for m in conv.messages]
        if conv.token_ids is not None:
            pairs = [(Message("user", (self.token_ids(conv.token_ids),)), pairs[0][1])]
            pairs[0] = (pairs[0][0], self.key(b"ids", str(conv.token_ids).encode()))
        context = [self.key(b"tools", *(t.key.encode() for t in tools))]
        return RecordedPrompt(tools, tuple(m for m, _ in pairs)), context + [k for _, k in pairs]


_ROLES = ("system", "developer", "user", "assistant", "tool")


def piece_ends(pattern_findall: Callable[[str], list[str]]) -> TokenEnds:
    """Token ends from a function that cuts a text into its tokens' texts (in order, whole)."""

    def ends(text: str) -> list[int]:
        out, at = [], 0
        for piece in pattern_findall(text):
            at += len(piece)
            out.append(at)
        return out

    return ends


def load_salt(path: Path) -> bytes:
    """The recording's secret key, from `path` (made there, readable by its owner only, on first
    use): never written anywhere else, so a recording's keys cannot be tested against guesses."""
    try:
        salt = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        salt = secrets.token_bytes(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(salt)
    except OSError as exc:
        raise InputError(f"cannot read the salt: {exc.strerror}", path=path) from exc
    if len(salt) < 16:
        raise InputError("a salt file must hold at least 16 bytes", path=path)
    return salt


def default_salt_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "agentic-harness" / "record.salt"
