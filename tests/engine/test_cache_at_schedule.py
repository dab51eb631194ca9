"""`cache_at_schedule`, vLLM's `allocate_slots`: a chunk's full blocks are hashed when it is
scheduled, so a request scheduled after it in the same step hits them; without it the two compute
the prefix twice. (That the tokens stay right: tests/engine/test_core_equivalence.py.)"""

from __future__ import annotations

import pytest

from harness.engine.engine import LLMEngine

from .conftest import drain, greedy, prompt, sim


@pytest.mark.parametrize(("on", "second_hit"), [(False, 0), (True, 64)])
def test_a_request_in_the_same_step_hits_the_blocks_scheduled_before_it(on, second_hit):
    e = LLMEngine(sim(num_gpu_blocks=40, block_size=16, cache_at_schedule=on, debug_checks=True))
    twin = prompt(2, 64)
    e.add_request("a", twin, greedy(1))
    e.add_request("b", twin + prompt(3, 5), greedy(1))  # 64 tokens of a's, then its own
    first = e.step()  # both scheduled in one step
    assert {o.request_id for o in first} == {"a", "b"}
    cached = {o.request_id: o.cached_tokens for o in first}
    assert cached == {"a": 0, "b": second_hit}  # b's 4 full blocks are a's


def test_the_blocks_are_hashed_once_whether_at_schedule_or_after():
    pools = []
    for on in (False, True):
        e = LLMEngine(sim(num_gpu_blocks=40, block_size=16, cache_at_schedule=on))
        e.add_request("a", prompt(5, 70), greedy(20))
        drain(e)
        pools.append(sorted(b.hash for b in e.pool.blocks if b.hash is not None))
    assert pools[0] == pools[1] and len(pools[0]) == 5  # 89 tokens: 5 full blocks
