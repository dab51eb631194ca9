"""The remote tier: a KV store shared by replicas (`harness kv-store`), as a client.

Blocks are content-addressed by the prefix cache's hash chain (`prefix_lookup.block_hash`, plus
the KV group), so every replica names a prefix the same way and one replica's blocks serve
another's prefix hits. Full blocks go to the store as they are computed (write-through, batched
once per engine step), as vLLM's Mooncake Store connector and LMCache save KV after prefill: a
replica need not evict a block before another can reuse it. A lookup asks once for the longest
run of a request's next blocks the store holds and keeps what came back until it is used.

The wire format (`pack` / `unpack`) is shared with the server (`harness/serving/kv_store.py`):
records of (key, token ids, KV bytes), each length-prefixed. A store that cannot be reached at
start is a one-line error; later failures count in `num_errors` and read as misses.
"""

from __future__ import annotations

import http.client
import struct
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

from harness.errors import EngineError

Record = tuple[bytes, bytes, bytes]  # key, token ids, KV bytes
_HEAD = struct.Struct("<HII")


def pack(records: Iterable[Record]) -> bytes:
    out = bytearray()
    for key, tokens, data in records:
        out += _HEAD.pack(len(key), len(tokens), len(data)) + key + tokens + data
    return bytes(out)


def unpack(body: bytes) -> Iterator[Record]:
    i, view = 0, memoryview(body)
    while i < len(body):
        if i + _HEAD.size > len(body):
            raise ValueError("truncated record header")
        nk, nt, nd = _HEAD.unpack_from(body, i)
        i += _HEAD.size
        end = i + nk + nt + nd
        if end > len(body):
            raise ValueError("truncated record")
        yield (
            bytes(view[i : i + nk]),
            bytes(view[i + nk : i + nk + nt]),
            bytes(view[i + nk + nt : end]),
        )
        i = end


def parse_url(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise EngineError(f"field 'kv_store': {url!r} is not http://HOST:PORT")
    return parts.hostname, parts.port


class RemoteTier:
    def __init__(self, url: str, *, keep: int = 8192, timeout_s: float = 30.0) -> None:
        self.url = url
        self.keep = keep  # fetched blocks held until used (a blocked request looks up again)
        self.host, self.port = parse_url(url)
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._fetched: OrderedDict[bytes, tuple[bytes, bytes]] = OrderedDict()
        self.pending: list[Record] = []  # write-through puts of this step
        self.num_errors = 0
        try:
            self._request("GET", "/health", b"")
        except (OSError, http.client.HTTPException) as exc:
            raise EngineError(f"field 'kv_store': cannot reach {url} ({exc})") from exc

    def _request(self, method: str, path: str, body: bytes) -> bytes:
        for attempt in (0, 1):  # a kept-alive connection the server closed: reconnect once
            if self._conn is None:
                self._conn = http.client.HTTPConnection(
                    self.host, self.port, timeout=self.timeout_s
                )
            try:
                self._conn.request(method, path, body=body)
                resp = self._conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
                continue
            if resp.status != 200:
                raise http.client.HTTPException(f"{path}: HTTP {resp.status}")
            return data
        raise AssertionError("unreachable")

    def _call(self, path: str, body: bytes) -> bytes | None:
        try:
            return self._request("POST", path, body)
        except (OSError, http.client.HTTPException):
            self.num_errors += 1
            return None

    def put(self, key: bytes, tokens: bytes, data: bytes) -> None:
        self.pending.append((key, tokens, data))

    def flush(self) -> int:
        """Send this step's puts in one request; the blocks sent."""
        if not self.pending:
            return 0
        records, self.pending = self.pending, []
        return len(records) if self._call("/put", pack(records)) is not None else 0

    def prefetch(self, keys: list[bytes]) -> int:
        """Fetch the longest run of `keys` the store holds (after those already fetched)."""
        i = 0
        while i < len(keys) and keys[i] in self._fetched:
            i += 1
        if i == len(keys):
            return 0
        body = self._call("/get", pack((k, b"", b"") for k in keys[i:]))
        got = list(unpack(body)) if body else []
        for key, tokens, data in got:
            self._fetched[key] = (tokens, data)
        while len(self._fetched) > self.keep:
            self._fetched.popitem(last=False)
        return len(got)

    def get(self, key: bytes, tokens: bytes) -> bytes | None:
        block = self._fetched.get(key)
        return block[1] if block is not None and block[0] == tokens else None

    def taken(self, key: bytes) -> None:
        """A fetched block is on the device now: no need to hold it here."""
        self._fetched.pop(key, None)

    def contains(self, key: bytes) -> bool:
        if key in self._fetched:
            return True
        body = self._call("/has", pack([(key, b"", b"")]))
        return body is not None and int.from_bytes(body[:4], "little") > 0
