"""The content's word stream is SplitMix64 over a counter (harness.trace.content._word_stream):
its vectorized form gives, word for word, what the formula gives in plain integers, at every
length (the prompts' bytes are what a server caches: a change would be a new content)."""

import pytest

from harness.trace.content import _word_stream
from harness.vocab import WORDS

_M = (1 << 64) - 1


def _splitmix(key: int, n: int) -> list[int]:
    out = []
    for i in range(1, n + 1):
        x = (i * 0x9E3779B97F4A7C15 + key) & _M
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M
        x ^= x >> 31
        out.append(x % len(WORDS))
    return out


@pytest.mark.parametrize("n", [0, 1, 48, 4096, 4097, 5000])
@pytest.mark.parametrize("key", [0, 12345, (1 << 64) - 1, 0x9E3779B97F4A7C15])
def test_word_stream_is_splitmix64_over_a_counter(key, n):
    assert _word_stream(key, n).tolist() == _splitmix(key, n)


def test_a_shorter_stream_is_a_prefix_of_a_longer_one():
    assert _word_stream(7, 4100)[:300].tolist() == _word_stream(7, 300).tolist()
