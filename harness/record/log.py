"""requests.jsonl: the recording's append-only log, one line when a request arrives and one when
it ends, each flushed as written (what a crash or Ctrl-C leaves is whole lines).

A `request` line holds the request's recorded prompt as a delta from an earlier request's (the
one it shares the most messages with: `base`, `keep`), its context keys (for session
reconstruction) and its session headers; a `done` line its outcome, times and token counts.
Nothing in either is prompt text (unless the recording keeps content) or a header other than the
session headers. `trace.jsonl` and `recording.json` are rebuilt from this file
(`record.recording`), at the end and while recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import TraceFormatError
from harness.trace.recorded import RecordedFormatError, RecordedPrompt, prompt_from, prompt_obj

LOG_FILE = "requests.jsonl"


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str


class RequestLine(_Line):
    kind: str = "request"
    id: int
    t_sent: float
    api: str
    path: str
    model: str | None = None
    stream: bool = False
    max_tokens: int | None = None
    headers: dict[str, str] = {}
    context: list[str] = []
    system: int = 0
    replies: list[int] = []  # context positions of its assistant messages
    prompt: dict | None = None  # None: the body could not be read as its API's request
    prompt_tokens: int = 0  # counted by the recording's tokenizer
    dropped: dict[str, int] = {}
    unreadable: str | None = None  # why the body could not be read
    chained: bool = False  # a Responses request whose history the server kept


class DoneLine(_Line):
    kind: str = "done"
    id: int
    outcome: str
    status: int
    t_first_byte: float | None = None
    t_last_byte: float | None = None
    t_end: float
    output_tokens: int = 0  # as reported, else counted
    output_counted: bool = False  # counted by the recording's tokenizer (no usage reported)
    calls: int = 0  # tool calls in the reply
    usage: dict | None = None  # as the upstream reported it
    tokens: dict[str, int | None] = {}  # normalized (`record.replies.Reply.normalized`)
    diagnostics: dict | None = None
    finish_reason: str | None = None
    events: int = 0
    error: str | None = None


class Writer:
    """Appends lines; `base` bookkeeping lives with the caller (`record.writer`)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / LOG_FILE
        self._fh: IO[bytes] = self.path.open("ab")

    def write(self, line: _Line) -> None:
        self._fh.write(orjson.dumps(line.model_dump(exclude_defaults=True) | {"kind": line.kind}))
        self._fh.write(b"\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def request_prompt(
    prompt: RecordedPrompt, base: int | None, base_prompt: RecordedPrompt | None
) -> dict:
    """A prompt as the log writes it: the delta from its base request's."""
    return {"base": base, **prompt_obj(prompt, base_prompt)}


class Entries:
    """The log read back: request lines, done lines and each request's whole prompt."""

    def __init__(self) -> None:
        self.requests: dict[int, RequestLine] = {}
        self.done: dict[int, DoneLine] = {}
        self.prompts: dict[int, RecordedPrompt] = {}


def read(folder: Path) -> Entries:
    path, out = folder / LOG_FILE, Entries()
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise TraceFormatError(
            f"cannot open the recording's log: {exc.strerror}", path=path
        ) from exc
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if raw.strip():
                _read_line(raw, out, path, lineno)
    return out


def _read_line(raw: bytes, out: Entries, path: Path, lineno: int) -> None:
    try:
        obj: Any = orjson.loads(raw)
        if not isinstance(obj, dict):
            raise TraceFormatError("expected a JSON object", path=path, line=lineno)
        if obj.get("kind") == "done":
            done = DoneLine.model_validate(obj)
            out.done[done.id] = done
            return
        req = RequestLine.model_validate(obj)
    except orjson.JSONDecodeError:
        if raw.endswith(b"\n"):
            raise TraceFormatError("invalid JSON", path=path, line=lineno) from None
        return  # the last line, cut by a crash: what was whole is read
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise TraceFormatError(err["msg"], path=path, line=lineno, field=field) from None
    out.requests[req.id] = req
    if req.prompt is not None:
        out.prompts[req.id] = _prompt(req, out, path, lineno)


def _prompt(req: RequestLine, out: Entries, path: Path, lineno: int) -> RecordedPrompt:
    assert req.prompt is not None
    delta = dict(req.prompt)
    base = delta.pop("base", None)
    if base is not None and base not in out.prompts:
        raise TraceFormatError(
            f"base {base} is not an earlier request", path=path, line=lineno, field="prompt.base"
        )
    try:
        return prompt_from(delta, out.prompts.get(base) if base is not None else None, "prompt")
    except RecordedFormatError as exc:
        raise TraceFormatError(str(exc), path=path, line=lineno, field=exc.field) from None
