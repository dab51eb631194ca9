"""The longest prefix a token sequence shares with any sequence seen before: an ideal prefix cache
over literal token ids (the server's tokens), where `trace.prefix` walks the trace's segments.

Sequences are kept sorted as big-endian 4-byte ids, whose byte order is the id order, so
comparisons are `bytes` comparisons in C; the longest common prefix of a new sequence with any
kept one is with one of its two neighbours in that order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

ID_BYTES = 4


def token_key(ids: Sequence[int] | np.ndarray) -> bytes:
    return np.asarray(ids, dtype=">u4").tobytes()


def common_prefix(a: bytes, b: bytes) -> int:
    """Tokens two keys share at their start."""
    n = min(len(a), len(b))
    differ = np.frombuffer(a, np.uint8, n) != np.frombuffer(b, np.uint8, n)
    first = int(differ.argmax()) if differ.any() else n
    return first // ID_BYTES


class TokenPrefixes:
    def __init__(self) -> None:
        self._keys: list[bytes] = []

    def __len__(self) -> int:
        return len(self._keys)

    def shared_prefix(self, key: bytes) -> int:
        """Tokens of `key` at its start that some kept sequence also starts with."""
        i = bisect_left(self._keys, key)
        near = self._keys[max(i - 1, 0) : i + 1]
        return max((common_prefix(key, k) for k in near), default=0)

    def add(self, key: bytes) -> None:
        i = bisect_left(self._keys, key)
        if i == len(self._keys) or self._keys[i] != key:
            self._keys.insert(i, key)
