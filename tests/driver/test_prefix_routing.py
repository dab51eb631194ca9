"""`longest_prefix` routing: a prompt goes where its longest leading part was sent before."""

import numpy as np

from harness.driver.prefix_routing import CHUNK_BYTES, PrefixIndex, chunk_names, prompt_bytes
from harness.driver.routing import POLICIES, Router

TOKENS_PER_CHUNK = CHUNK_BYTES // 8  # int64 token ids


def _ids(seed: int, chunks: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 50_000, chunks * TOKENS_PER_CHUNK)


def test_a_turn_follows_its_session_even_to_a_busier_endpoint():
    r = Router(["a", "b", "c"], "longest_prefix")
    first = _ids(1, 4)
    home = r.pick("s1", first)
    for _ in range(5):  # load the home endpoint: a cache hit is worth more than balance
        r.outstanding[home] += 1
    longer = np.concatenate([first, _ids(2, 3)])
    assert r.pick("s1", longer) == home


def test_a_new_prompt_goes_to_the_least_loaded():
    r = Router(["a", "b", "c"], "longest_prefix")
    r.outstanding[:] = [3, 0, 2]
    assert r.pick("s", _ids(7, 2)) == 1


def test_a_prefix_is_matched_chunk_by_chunk_from_the_start():
    a, b = _ids(1, 3), _ids(2, 3)
    index = PrefixIndex(2)
    index.sent(0, chunk_names(prompt_bytes(a)))
    assert index.match(0, chunk_names(prompt_bytes(a))) == 3
    assert index.match(0, chunk_names(prompt_bytes(np.concatenate([a[:-1], b])))) == 2
    assert index.match(0, chunk_names(prompt_bytes(np.concatenate([b, a])))) == 0
    assert index.match(1, chunk_names(prompt_bytes(a))) == 0


def test_the_index_forgets_the_least_recently_sent():
    index = PrefixIndex(1, capacity=4)
    index.sent(0, chunk_names(prompt_bytes(_ids(1, 4))))
    index.sent(0, chunk_names(prompt_bytes(_ids(2, 2))))
    assert index.match(0, chunk_names(prompt_bytes(_ids(1, 4)))) == 0  # its first chunks went
    assert index.match(0, chunk_names(prompt_bytes(_ids(2, 2)))) == 2


def test_text_and_messages_prompts_are_routed_too():
    r = Router(["a", "b"], "longest_prefix")
    text = "word " * 600
    home = r.pick("s", text)
    r.outstanding[home] += 3
    assert r.pick("s", text + "more") == home
    messages = [{"role": "user", "content": text}]
    assert isinstance(prompt_bytes(messages), bytes)
    assert "longest_prefix" in POLICIES
