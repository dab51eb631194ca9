"""Tool-shaped turns (`turn_form: tools`): each session's tool schemas and each turn's tool call.

A coding agent's turn is a tool call and the next turn's new input is its result. Here:

- **Tools** are a function of the system prompt (its id and the trace seed): a coding agent's
  core set (Task, Bash, Glob, Grep, Read, Edit, Write) and some of the optional ones, in the
  catalog's order, as OpenAI chat tool schemas. Sessions sharing a system prompt share their
  tools, so the tools stay part of the prefix they share.
- **A call** is planned from the turn alone: a turn that starts subagents calls Task once per
  subagent (their reports are its results); a session's last turn answers in text; any other
  turn calls one tool, small outputs a lookup (Read, Grep, Glob, Bash), large ones a change
  (Edit, Write, Bash). Its output tokens are split between a short explanation (the message's
  text) and the tool's free-text argument (a pattern, a command, new code, a subagent's task);
  the other arguments (paths, flags) are scaffolding outside the trace's counts, as a chat
  template's role markers are.
- **The result** of a call is the next turn's new input, in the form that tool returns.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from harness.trace.model import Session, Trace

EXPLANATION_MAX = 24  # tokens of text before a call that also carries a free-text argument
SMALL_OUTPUT = 64  # outputs up to this many tokens look something up; longer ones change code


def _string(description: str) -> dict:
    return {"type": "string", "description": description}


def _schema(name: str, description: str, required: list[str], /, **props: dict) -> dict:
    parameters = {"type": "object", "properties": props, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


_PATH = _string("The absolute path to the file")
CATALOG: tuple[dict, ...] = (
    _schema(
        "Task",
        "Launch a new agent to handle a complex, multi-step task autonomously. The agent works "
        "with its own context and returns one final report.",
        ["description", "prompt", "subagent_type"],
        description=_string("A short (3-5 word) description of the task"),
        prompt=_string("The task for the agent to perform"),
        subagent_type=_string("The type of specialized agent to use for this task"),
    ),
    _schema(
        "Bash",
        "Executes a given bash command in a persistent shell session with an optional timeout.",
        ["command"],
        command=_string("The command to execute"),
        description=_string("Clear, concise description of what this command does in 5-10 words"),
        timeout={"type": "number", "description": "Optional timeout in milliseconds (max 600000)"},
    ),
    _schema(
        "Glob",
        "Fast file pattern matching tool that works with any codebase size. Returns matching "
        "file paths sorted by modification time.",
        ["pattern"],
        pattern=_string("The glob pattern to match files against"),
        path=_string("The directory to search in; defaults to the current working directory"),
    ),
    _schema(
        "Grep",
        "A powerful search tool built on ripgrep. Supports full regex syntax; filter files with "
        "the glob parameter; output modes: content, files_with_matches, count.",
        ["pattern"],
        pattern=_string("The regular expression pattern to search for in file contents"),
        path=_string("File or directory to search in; defaults to the current working directory"),
        glob=_string('Glob pattern to filter files (e.g. "*.py")'),
        output_mode={"type": "string", "enum": ["content", "files_with_matches", "count"]},
    ),
    _schema(
        "Read",
        "Reads a file from the local filesystem. Results are returned using cat -n format, with "
        "line numbers starting at 1.",
        ["file_path"],
        file_path=_PATH,
        offset={"type": "number", "description": "The line number to start reading from"},
        limit={"type": "number", "description": "The number of lines to read"},
    ),
    _schema(
        "Edit",
        "Performs exact string replacements in files. The edit fails if old_string is not "
        "unique in the file.",
        ["file_path", "old_string", "new_string"],
        file_path=_PATH,
        old_string=_string("The text to replace"),
        new_string=_string("The text to replace it with (must be different from old_string)"),
        replace_all={"type": "boolean", "description": "Replace all occurrences of old_string"},
    ),
    _schema(
        "Write",
        "Writes a file to the local filesystem, overwriting the existing file if there is one.",
        ["file_path", "content"],
        file_path=_PATH,
        content=_string("The content to write to the file"),
    ),
    _schema(
        "TodoWrite",
        "Create and manage a structured task list for the current coding session.",
        ["todos"],
        todos={
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                },
                "required": ["content", "status"],
            },
        },
    ),
    _schema(
        "WebFetch",
        "Fetches content from a URL and processes it with a prompt.",
        ["url", "prompt"],
        url=_string("The URL to fetch content from"),
        prompt=_string("The prompt to run on the fetched content"),
    ),
    _schema(
        "NotebookEdit",
        "Replaces the contents of a specific cell in a Jupyter notebook.",
        ["notebook_path", "new_source"],
        notebook_path=_string("The absolute path to the Jupyter notebook file to edit"),
        new_source=_string("The new source for the cell"),
        cell_number={"type": "number", "description": "The index of the cell to edit"},
    ),
)
CORE = frozenset({"Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write"})
SMALL_TOOLS = (("Read", 4), ("Grep", 2), ("Glob", 1), ("Bash", 2))
LARGE_TOOLS = (("Edit", 4), ("Write", 2), ("Bash", 1))
PAYLOAD_ARGUMENT = {  # the free-text argument a tool's call carries its output tokens in
    "Task": "prompt",
    "Bash": "command",
    "Grep": "pattern",
    "Edit": "new_string",
    "Write": "content",
}
RESULT_KIND = {  # the form a tool's result takes (harness.trace.code_text's documents)
    "Bash": "test",
    "Glob": "glob",
    "Grep": "grep",
    "Read": "read",
    "Edit": "edit",
    "Write": "write",
}
PAYLOAD_KIND = {"Bash": "command", "Grep": "source", "Edit": "source", "Write": "source"}


def stable_hash(*parts: object) -> int:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def session_tools(seed: int, system_id: str) -> list[dict]:
    """The tool schemas of every session with this system prompt: the core set and each
    optional tool with probability 1/2, in the catalog's order."""
    return [
        t
        for t in CATALOG
        if t["function"]["name"] in CORE or stable_hash(seed, system_id, t["function"]["name"]) % 2
    ]


def call_id(seed: int, session_id: str, turn: int, index: int) -> str:
    """A tool call's id: letters and digits only (what every API accepts), unique per call."""
    return f"call_{stable_hash(seed, session_id, turn, index):016x}"


@dataclass(frozen=True, slots=True)
class Call:
    """The tool calls one assistant turn makes (one tool; several calls only for Task)."""

    name: str
    ids: tuple[str, ...]
    explanation: int  # tokens of the message's text
    payloads: tuple[int, ...]  # tokens of each call's free-text argument

    @property
    def result_kind(self) -> str:
        return RESULT_KIND.get(self.name, "read")


def plan_call(
    seed: int, trace: Trace, s: Session, turn: int, tools: frozenset[str] = CORE
) -> Call | None:
    """The call turn `turn` of `s` makes, or None when it answers in text (the last turn).
    `tools`: the names the session's (scaled) tool set has; a lookup or a change calls one of
    them (a spawning turn calls Task, which a scaled set may lack: its schema did not fit)."""
    t = s.turns[turn]
    if turn == len(s.turns) - 1 and not t.spawns:
        return None
    n, h = t.output_tokens, stable_hash(seed, s.id, turn, "tool")
    kinds = LARGE_TOOLS if n > SMALL_OUTPUT else SMALL_TOOLS
    name = "Task" if t.spawns else _pick(_available(kinds, tools), h)
    calls = max(1, len(t.spawns))
    ids = tuple(call_id(seed, s.id, turn, i) for i in range(calls))
    if name not in PAYLOAD_ARGUMENT:
        return Call(name, ids, n, (0,))
    explanation = min(n // 4, EXPLANATION_MAX)
    rest = n - explanation
    payloads = tuple(rest // calls + (1 if i < rest % calls else 0) for i in range(calls))
    return Call(name, ids, explanation, payloads)


def _available(
    weighted: tuple[tuple[str, int], ...], tools: frozenset[str]
) -> tuple[tuple[str, int], ...]:
    """The weighted tools the set has; else any it has (by payload first), in a fixed order."""
    kept = tuple((name, w) for name, w in weighted if name in tools)
    if kept:
        return kept
    # Task only as the last resort: its result is a subagent's report, not a tool's output
    ordered = sorted(tools, key=lambda name: (name == "Task", name not in PAYLOAD_ARGUMENT, name))
    return ((ordered[0], 1),) if ordered else weighted


def _pick(weighted: tuple[tuple[str, int], ...], h: int) -> str:
    point = h % sum(w for _, w in weighted)
    for name, w in weighted:
        if point < w:
            return name
        point -= w
    return weighted[-1][0]


def arguments(call: Call, index: int, payload: str, path: str, line: str, words: str) -> str:
    """A call's arguments as the JSON string OpenAI's API carries: the free-text argument and
    scaffolding (`path` a file, `line` one of its lines, `words` a few words)."""
    name = call.name
    args: dict[str, object]
    if name == "Task":
        args = {"description": words, "prompt": payload, "subagent_type": "general-purpose"}
    elif name == "Bash":
        args = {"command": payload, "description": words}
    elif name == "Grep":
        args = {"pattern": payload, "path": path.rsplit("/", 1)[0], "output_mode": "content"}
    elif name == "Glob":
        args = {"pattern": "**/*.py", "path": path.rsplit("/", 1)[0]}
    elif name == "Edit":
        args = {"file_path": path, "old_string": line, "new_string": payload}
    elif name == "Write":
        args = {"file_path": path, "content": payload}
    else:  # Read
        args = {"file_path": path, "offset": 1 + stable_hash(path, index) % 200, "limit": 200}
    # json.dumps' default form is what a server that parses the arguments and writes them back
    # (vLLM renders them with `tojson`) produces, so both give the same text
    return json.dumps(args, ensure_ascii=False)


def tool_call(call: Call, index: int, arguments_json: str) -> dict:
    return {
        "id": call.ids[index],
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_json},
    }
