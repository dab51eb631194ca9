"""An incremental Server-Sent Events parser for OpenAI-style streams.

Feed it the bytes as they arrive (any split, even mid-"\\r\\n"); it returns the `data` payloads
of the events completed so far. It follows the WHATWG event-stream rules that real servers
exercise: LF, CRLF or CR line ends, several `data:` lines joined by "\\n", comment lines
(": keep-alive"), other fields (`event:`, `id:`, `retry:`) ignored, events without data dropped.
The common case (one `data: {...}` line per event, LF line ends) takes a fast path.
"""

from __future__ import annotations

from harness.errors import SSEError

DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


class SSEParser:
    __slots__ = ("_buf", "_max", "_started")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._buf = b""
        self._max = max_event_bytes
        self._started = False

    def feed(self, data: bytes) -> list[bytes]:
        # Fast path: a read of whole one-line `data: ...` events with LF line ends, nothing held
        # from before (a paced server's every read is one; a fast one's hold dozens).
        if (
            self._buf
            or not data.startswith(b"data: ")
            or not data.endswith(b"\n\n")
            or b"\r" in data
        ):
            return self._feed(data)
        n = data.count(b"\n\ndata: ") + 1
        if data.count(b"\n") != 2 * n or len(data) > self._max:
            return self._feed(data)  # another field, a multi-line event, or a huge read
        self._started = True  # (a stream that opens with "data: " has no byte-order mark)
        return [data[6:-2]] if n == 1 else data[6:-2].split(b"\n\ndata: ")

    def _feed(self, data: bytes) -> list[bytes]:
        buf = self._buf + data if self._buf else data
        if not self._started and buf:
            self._started = True
            if buf.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark may open the stream
                buf = buf[3:]
        if b"\r" in buf:
            buf = self._normalize(buf)
        blocks = buf.split(b"\n\n")
        self._buf = rest = blocks.pop()
        if len(rest) > self._max:
            self._buf = b""
            raise SSEError(f"event larger than {self._max} bytes")
        out: list[bytes] = []
        for block in blocks:
            if len(block) > self._max:
                raise SSEError(f"event larger than {self._max} bytes")
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(block[6:])  # one data line
            elif block:
                payload = _slow_event(block)
                if payload is not None:
                    out.append(payload)
        return out

    def _normalize(self, buf: bytes) -> bytes:
        # A trailing CR may be the first half of a CRLF split across reads: keep it for later.
        held = buf.endswith(b"\r")
        if held:
            buf = buf[:-1]
        buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return buf + b"\r" if held else buf

    def close(self) -> list[bytes]:
        """At end of stream: the payload of a last event missing its blank line, if any.

        The standard drops such an event; we keep it, since some servers end with a bare
        `data: [DONE]` line and the request is still complete.
        """
        rest, self._buf = self._buf.replace(b"\r", b"\n"), b""
        payload = _slow_event(rest) if rest.strip() else None
        return [payload] if payload is not None else []


def _slow_event(block: bytes) -> bytes | None:
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue  # blank (leading newlines) or comment / keep-alive
        name, colon, value = line.partition(b":")
        if name != b"data":
            continue
        if colon and value.startswith(b" "):
            value = value[1:]
        data.append(value)
    return b"\n".join(data) if data else None
