"""`longest_prefix` routing: each request to the endpoint that most likely holds its prompt's prefix.

The router cannot see a server's cache, so it keeps its own picture of it, as cache-aware routers
do (SGLang's router keeps an approximate radix tree of the prompts it sent each worker): per
endpoint, the prompt-prefix chunks it routed there, least recently used first out. A prompt is cut
into fixed chunks of its bytes (token ids, text or messages), each chunk named by a hash of the
chunk and the name of the one before it, so a name stands for the whole prefix up to it. A request
goes to the endpoint holding the longest run of its leading chunks; where none holds any (a new
session) or several hold as many, to the one with the fewest requests in flight (ties rotate).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np
import orjson

CHUNK_BYTES = 1024  # 128 int64 token ids: coarse enough to be cheap at 142k-token prompts
CHUNKS_PER_ENDPOINT = 1 << 16  # remembered per endpoint (64 MiB of prompt bytes each)


def prompt_bytes(prompt: object) -> bytes:
    """A prompt's bytes: token ids as they are held, text as UTF-8, chat messages as JSON."""
    if isinstance(prompt, np.ndarray):
        return prompt.tobytes()
    if isinstance(prompt, str):
        return prompt.encode()
    if isinstance(prompt, bytes | bytearray | memoryview):
        return bytes(prompt)
    return orjson.dumps(prompt, option=orjson.OPT_SERIALIZE_NUMPY, default=str)


def chunk_names(data: bytes) -> list[bytes]:
    """The names of the prompt's full chunks, each one's name covering every byte before it."""
    names, parent = [], b""
    for start in range(0, len(data) - CHUNK_BYTES + 1, CHUNK_BYTES):
        chunk = data[start : start + CHUNK_BYTES]
        parent = hashlib.blake2b(parent + chunk, digest_size=8).digest()
        names.append(parent)
    return names


class PrefixIndex:
    """What each endpoint was sent: chunk names in least-recently-used order."""

    def __init__(self, n: int, capacity: int = CHUNKS_PER_ENDPOINT) -> None:
        self.held: list[OrderedDict[bytes, None]] = [OrderedDict() for _ in range(n)]
        self.capacity = capacity

    def match(self, i: int, names: list[bytes]) -> int:
        """How many leading chunks endpoint i holds (a prefix: the first miss ends it)."""
        held, k = self.held[i], 0
        while k < len(names) and names[k] in held:
            k += 1
        return k

    def sent(self, i: int, names: list[bytes]) -> None:
        held = self.held[i]
        for name in names:
            held[name] = None
            held.move_to_end(name)
        while len(held) > self.capacity:
            held.popitem(last=False)
