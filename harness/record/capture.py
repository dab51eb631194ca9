"""One captured exchange: what the proxy saw of a request and of its response, with its times.

The proxy fills it as bytes pass (nothing is parsed on the way: the request body is kept as
it came, the response's bytes are appended as each read brings them) and hands it to the
writer twice: when the request arrived, and when its response ended. Times are seconds on the
proxy's one clock (`time.perf_counter`). Only the session headers of
`record.sessions.SESSION_HEADERS` are kept, never the others (Authorization, x-api-key, ...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from harness.record.sessions import SESSION_HEADERS

Outcome = str  # ok | http_error | failed | cancelled


@dataclass(eq=False)
class Exchange:
    id: int
    path: str
    api: str
    t_sent: float  # the request arrived (its head and body read)
    body: bytes
    headers: dict[str, str]  # session headers only, names in lower case
    encoding: str = "identity"  # the request body's Content-Encoding
    status: int = 0
    content_type: str = ""
    reply_encoding: str = "identity"
    reply: bytearray = field(default_factory=bytearray)
    t_first_byte: float | None = None
    t_last_byte: float | None = None
    t_end: float | None = None
    outcome: Outcome = "ok"
    error: str | None = None  # the proxy's own failure (upstream unreachable, cut), one line

    def take(self, data: bytes) -> None:
        """A read of the response body (as it came: still encoded)."""
        now = time.perf_counter()
        if self.t_first_byte is None:
            self.t_first_byte = now
        self.t_last_byte = now
        self.reply += data

    def end(self, outcome: Outcome, error: str | None = None) -> None:
        """The exchange ended (its first end counts). A body read whole ended at its last
        byte, stamped before the proxy passed it on, so the agent's next request is always
        sent after it (an SDK sends on [DONE], while the upstream's chunked end may be on
        its way still)."""
        if self.t_end is None:
            whole = outcome in ("ok", "http_error") and self.t_last_byte is not None
            self.t_end = self.t_last_byte if whole else time.perf_counter()
        if self.outcome == "ok":
            self.outcome, self.error = outcome, error

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith("text/event-stream")


def session_headers(headers) -> dict[str, str]:
    """The session headers among a request's (any multidict or mapping of str to str)."""
    return {k.lower(): v for k, v in headers.items() if k.lower() in SESSION_HEADERS}
