"""The harness's exception tree, mapped to one line at the CLI boundary.

    HarnessError                 anything the harness reports as a clean failure (exit 2)
    ├── InputError               bad user input: names the file, line and field
    │   ├── TraceFormatError     a trace file that does not parse or validate
    │   ├── ProfileError         a workload profile with unknown or invalid keys
    │   ├── ScenarioError        a scenario file with unknown or invalid keys
    │   └── RunFolderError       a run folder that is missing files or has a bad schema
    ├── TargetError              an endpoint that cannot be reached, or that fails the preflight
    ├── WriteError               a run folder that could not be written (a full disk): the run
    │                            stopped at the first failed write
    ├── DependencyError          an installed library lacks what the harness relies on
    ├── EngineError              the reference engine refused a config or failed to start
    │   └── EngineRequestError   (engine/engine.py) an invalid request: a 400, not a crash
    ├── ChatTemplateError        a chat template refused a conversation (also a ValueError);
    │                            `param` names the offending request field when known
    ├── SSEError                 a response stream that is not valid event-stream data (also a
    │                            ValueError); the HTTP target records it as a failed request
    ├── ApiError                 (serving/protocol.py) an HTTP error the served engine answers
    │                            with an OpenAI-style body; never leaves the server
    └── ParquetSkipped           records a Parquet column cannot hold as is; `harness analyze`
                                 says so in one line and readers parse records.jsonl

A failed *request* is never an exception that escapes the driver: it is a record with a status.
Something skipped or assumed while the work goes on is a `HarnessWarning`: one line on stderr.
"""

from __future__ import annotations

from pathlib import Path


class HarnessError(Exception):
    """A failure reported to the user as one line, without a traceback."""


class InputError(HarnessError):
    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.field:
            where = f"{where}: field '{self.field}'" if where else f"field '{self.field}'"
        return f"{where}: {self.reason}" if where else self.reason


class TraceFormatError(InputError):
    pass


class ProfileError(InputError):
    pass


class ScenarioError(InputError):
    pass


class RunFolderError(InputError):
    pass


class TargetError(HarnessError):
    pass


class WriteError(HarnessError):
    pass


class DependencyError(HarnessError):
    pass


class EngineError(HarnessError):
    pass


class ChatTemplateError(HarnessError, ValueError):
    """A conversation a chat template cannot render: the reference server's template
    (harness/serving/chat_template.py) or a Hugging Face one (harness/trace/chat_tokens.py)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class SSEError(HarnessError, ValueError):
    """The stream is not valid event-stream data (e.g. an event above the size limit)."""


class HarnessWarning(UserWarning):
    """Printed by the CLI as one line, `harness: warning: ...`."""


class ParquetSkipped(HarnessError):
    """The records hold a value Parquet's typed columns cannot hold as is (analysis/parquet.py)."""
