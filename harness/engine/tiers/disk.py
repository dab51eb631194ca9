"""The disk tier: KV blocks evicted from the CPU tier, kept as checksummed files, an LRU.

Each block is one file in a folder of its own under the configured directory (so engines that
share a directory never delete each other's blocks); the folder is removed when the tier is
garbage-collected or the process exits. A file holds a magic number, a blake2b checksum of
(key, token ids, KV bytes), the token ids and the KV bytes. A read whose checksum, magic or token
ids disagree is a miss (counted in `num_corrupt`) and the file is dropped: a torn or bit-rotten
block must never be loaded as KV. A write that fails (disk full mid-run) drops the block and is
counted in `num_write_errors`; an engine does not stop for a cache it can recompute.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import weakref
from collections import OrderedDict
from pathlib import Path

from harness.errors import EngineError

_MAGIC = b"HKV1"
_DIGEST = 16
_HEADER = len(_MAGIC) + _DIGEST + 4  # magic, checksum, length of the token ids


def checksum(key: bytes, tokens: bytes, data: bytes) -> bytes:
    return hashlib.blake2b(key + tokens + data, digest_size=_DIGEST).digest()


def encode_file(key: bytes, tokens: bytes, data: bytes) -> bytes:
    return _MAGIC + checksum(key, tokens, data) + len(tokens).to_bytes(4, "little") + tokens + data


def decode_file(key: bytes, raw: bytes) -> tuple[bytes, bytes] | None:
    """(token ids, KV bytes) of a block file, or None if it is not intact."""
    if len(raw) < _HEADER or raw[:4] != _MAGIC:
        return None
    n = int.from_bytes(raw[4 + _DIGEST : _HEADER], "little")
    tokens, data = raw[_HEADER : _HEADER + n], raw[_HEADER + n :]
    if len(tokens) != n or checksum(key, tokens, data) != raw[4 : 4 + _DIGEST]:
        return None
    return tokens, data


def check_dir(directory: str, capacity: int, block_file_bytes: int) -> None:
    """A one-line error unless `directory` exists, is writable and has room for the tier."""
    path = Path(directory)
    if not path.is_dir():
        raise EngineError(f"field 'disk_offload_dir': {directory!r} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise EngineError(f"field 'disk_offload_dir': {directory!r} is not writable")
    need = capacity * block_file_bytes
    free = shutil.disk_usage(path).free
    if need > free:
        raise EngineError(
            f"field 'disk_offload_blocks': {capacity} blocks need {need / 2**30:.2f} GiB, "
            f"{directory!r} has {free / 2**30:.2f} GiB free"
        )


class DiskTier:
    def __init__(self, directory: str, capacity: int, block_bytes: int, token_bytes: int) -> None:
        check_dir(directory, capacity, _HEADER + token_bytes + block_bytes)
        self.capacity = capacity
        self.folder = Path(tempfile.mkdtemp(prefix="kv-disk-", dir=directory))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self.num_stored = 0
        self.num_evicted = 0
        self.num_corrupt = 0  # reads whose checksum or token ids did not match: misses
        self.num_write_errors = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, key: bytes) -> bool:
        return key in self._blocks

    def path(self, key: bytes) -> Path:
        return self.folder / f"{key.hex()}.kv"

    def put(self, key: bytes, tokens: bytes, data: bytes) -> None:
        try:
            self.path(key).write_bytes(encode_file(key, tokens, data))
        except OSError:
            self.num_write_errors += 1
            self._drop(key)
            return
        self._blocks[key] = None
        self._blocks.move_to_end(key)
        self.num_stored += 1
        while len(self._blocks) > self.capacity:
            oldest, _ = self._blocks.popitem(last=False)
            self.path(oldest).unlink(missing_ok=True)
            self.num_evicted += 1

    def get(self, key: bytes, tokens: bytes) -> bytes | None:
        """The block's KV bytes if resident, intact and of these token ids (refreshes its LRU)."""
        if key not in self._blocks:
            return None
        try:
            raw = self.path(key).read_bytes()
        except OSError:
            raw = b""
        block = decode_file(key, raw)
        if block is None or block[0] != tokens:
            self.num_corrupt += block is None
            self._drop(key)
            return None
        self._blocks.move_to_end(key)
        return block[1]

    def _drop(self, key: bytes) -> None:
        self._blocks.pop(key, None)
        self.path(key).unlink(missing_ok=True)

    def close(self) -> None:
        self._finalizer()
