"""The scheduler's step budget, caps, FCFS order, preemption and cached_tokens (simulated runner)."""

from __future__ import annotations

import pytest

from harness.engine.engine import LLMEngine
from harness.engine.sequence import SamplingParams

from .conftest import drain, greedy, prompt, sim


def step_log(engine: LLMEngine) -> list[list[tuple[str, int, int, bool]]]:
    """Run to idle; per step: (request id, start, tokens, was prefill) of each chunk."""
    log = []

    def record(when, eng):
        if when == "after":
            log.append(
                [
                    (
                        c.request.request_id,
                        c.start,
                        c.num_tokens,
                        c.start + c.num_tokens < c.request.num_prompt_tokens or c.num_tokens > 1,
                    )
                    for c in eng.last_schedule
                ]
            )

    drain(engine, record)
    return log


def test_every_step_respects_the_budget_and_the_long_prefill_cap():
    e = LLMEngine(sim(max_num_batched_tokens=48, long_prefill_token_threshold=20))
    for i in range(6):
        e.add_request(f"r{i}", prompt(i, 70 + 13 * i), greedy(5))
    log = step_log(e)
    assert log
    for step in log:
        assert sum(n for _, _, n, _ in step) <= 48
        assert all(n <= 20 for _, _, n, _ in step)
        ids = [r for r, *_ in step]
        assert len(ids) == len(set(ids))
    # The cap lets several requests prefill in one step instead of one hogging the budget.
    assert any(sum(1 for *_, pre in step if pre) >= 2 for step in log)


def test_chunks_are_contiguous_and_cover_every_token():
    e = LLMEngine(sim(max_num_batched_tokens=32))
    for i in range(3):
        e.add_request(f"r{i}", prompt(i, 100), greedy(4))
    seen: dict[str, int] = {}
    for step in step_log(e):
        for rid, start, n, _ in step:
            assert start == seen.get(rid, 0)
            seen[rid] = start + n
    assert all(v == 100 + 4 - 1 for v in seen.values())  # the last output is never fed back


def test_waiting_requests_are_admitted_fcfs_and_capped_by_max_num_seqs():
    e = LLMEngine(sim(max_num_seqs=2, max_num_batched_tokens=512))
    for i in range(5):
        e.add_request(f"r{i}", prompt(i, 40), greedy(3))
    order: list[str] = []
    for step in step_log(e):
        assert len(step) <= 2
        for rid, start, *_ in step:
            if start == 0:
                order.append(rid)
    assert order == [f"r{i}" for i in range(5)]


def test_prefill_schedule_interval_only_admits_prefill_every_nth_step():
    e = LLMEngine(sim(prefill_schedule_interval=3, max_num_batched_tokens=16))
    e.add_request("long", prompt(1, 64), greedy(30))
    e.add_request("late", prompt(2, 64), greedy(2))
    steps_with_decode_and_prefill = []
    for i, step in enumerate(step_log(e), start=1):
        decoding = any(not pre for *_, pre in step)
        prefilling = any(pre for *_, pre in step)
        if decoding and prefilling:
            steps_with_decode_and_prefill.append(i)
    assert steps_with_decode_and_prefill and all(i % 3 == 0 for i in steps_with_decode_and_prefill)


def test_preemption_recomputes_the_latest_arrival_and_all_finish():
    # 12 blocks of 16 tokens; three requests each growing to ~80 tokens cannot all fit.
    e = LLMEngine(sim(num_gpu_blocks=12, max_num_batched_tokens=256))
    for i in range(3):
        e.add_request(f"r{i}", prompt(i, 60), greedy(40))
    preempted_order = []

    def watch(when, eng):
        if when == "after":
            for r in eng.requests.values():
                if r.num_preemptions and r.request_id not in preempted_order:
                    preempted_order.append(r.request_id)

    out = drain(e, watch)
    assert e.stats().num_preemptions > 0
    assert preempted_order[0] == "r2"
    assert all(len(toks) == 40 for toks, _ in out.values())


VLLM_RULES = dict(
    admit_whole_prompt=True,
    cache_at_schedule=True,
    null_block=True,
    keep_duplicates=True,
    free_order="group",
)


def test_a_preempted_request_comes_back_first_and_hits_its_own_freed_blocks():
    # vLLM 0.32 where the pool cannot hold the running set: the last admitted is preempted, its
    # blocks freed with their hashes; it goes back to the head of the queue, is re-admitted before
    # a request that was waiting behind it, and finds its own prefix again.
    e = LLMEngine(sim(num_gpu_blocks=12, max_num_batched_tokens=256, **VLLM_RULES))
    for i in range(3):
        e.add_request(f"r{i}", prompt(i, 60), greedy(40))
    admitted: list[tuple[str, int]] = []  # (request, tokens it resumed from) in admission order
    seen: set[str] = set()

    def watch(when, eng):
        if when == "before" and eng.scheduler.num_steps == 1:
            eng.add_request("late", prompt(9, 60), greedy(4))
        if when == "after":
            for c in eng.last_schedule:
                key = f"{c.request.request_id}/{c.request.num_preemptions}"
                if key not in seen:
                    seen.add(key)
                    admitted.append((c.request.request_id, c.start))

    out = drain(e, watch)
    assert e.stats().num_preemptions > 0
    order = [rid for rid, _ in admitted]
    back = order.index("r2", order.index("r2") + 1)  # r2's re-admission
    assert order.index("late") > back  # it arrived before r2 came back, and waited behind it
    assert admitted[back][1] >= 48  # r2 resumed from its own blocks (3 of 16), not from 0
    assert out["r2"][1].cached_tokens == 0  # cached_tokens stays its first admission's
    assert all(len(toks) == n for (toks, _), n in zip(out.values(), (40, 40, 40, 4), strict=False))


class ResidentChainOracle:
    """cached_tokens from first principles: the longest run of leading prompt blocks whose whole
    prefix (every token up to the block's end) is held by a resident block, capped at n - 1."""

    def __init__(self, bs: int = 16) -> None:
        self.bs = bs
        self.prefix_of: dict[int, tuple] = {}  # block id -> every token up to the end of that block
        self.expected: dict[str, int] = {}
        self.admitted_first: set[str] = set()  # the first admission of its step (exact oracle)

    def __call__(self, when: str, eng: LLMEngine) -> None:
        bs = self.bs
        if when == "after":
            new = [
                c.request
                for c in eng.last_schedule
                if c.start == c.request.cached_tokens
                and c.request.num_preemptions == 0
                and c.request.request_id in self.expected
            ]
            if new:
                self.admitted_first.add(new[0].request_id)
            for r in eng.scheduler.running:
                for i, b in enumerate(r.block_table[: r.num_computed_tokens // bs]):
                    self.prefix_of[b] = tuple(r.token_ids[: (i + 1) * bs])
            return
        resident = {
            self.prefix_of[b.block_id]
            for b in eng.pool.blocks
            if b.hash is not None and b.block_id in self.prefix_of
        }
        for r in list(eng.scheduler.waiting)[:1]:
            if not r.admitted:
                k = 0
                while (
                    k < (r.num_tokens - 1) // bs and tuple(r.token_ids[: (k + 1) * bs]) in resident
                ):
                    k += 1
                self.expected[r.request_id] = k * bs


def oracle_workload(e: LLMEngine) -> None:
    shared = prompt(0, 100)
    for i in range(12):
        tail = prompt(100 + i % 4, 20 + 7 * (i % 3))
        e.add_request(
            f"r{i}", (shared if i % 2 else prompt(50 + i % 3, 100)) + tail, greedy(6 + 5 * (i % 3))
        )


@pytest.mark.parametrize("blocks,seqs", [(24, 1), (20, 4), (14, 8)])
def test_cached_tokens_match_an_independent_oracle_under_eviction(blocks, seqs):
    e = LLMEngine(sim(num_gpu_blocks=blocks, max_num_seqs=seqs))
    oracle = ResidentChainOracle()
    oracle_workload(e)
    out = drain(e, oracle)
    got = {rid: final.cached_tokens for rid, (_, final) in out.items()}
    checked = {rid: got[rid] for rid in oracle.admitted_first}
    assert checked == {rid: oracle.expected[rid] for rid in oracle.admitted_first}
    assert len(checked) >= 6
    assert any(v > 0 for v in got.values()) and any(v == 0 for v in got.values())
    assert e.pool.num_evictions > 0


def test_cached_tokens_are_set_at_first_admission_only():
    e = LLMEngine(sim(num_gpu_blocks=12, max_num_batched_tokens=256))
    e.add_request("a", prompt(0, 60), greedy(40))
    e.add_request("b", prompt(0, 60), greedy(40))
    out = drain(e)
    s = e.stats()
    assert s.num_preemptions > 0
    assert out["b"][1].cached_tokens == 0  # admitted in the same step as a: nothing was computed
    assert s.prefix_cache_hits == sum(f.cached_tokens for _, f in out.values())
    assert s.prefix_cache_queries == 120


def test_stop_tokens_and_min_tokens():
    e = LLMEngine(sim())
    p = prompt(3, 20)
    e.add_request("free", p, greedy(6))
    first = drain(e)["free"][0]
    e.add_request("stop", p, SamplingParams(max_tokens=6, stop_token_ids=(first[2],)))
    e.add_request("min", p, SamplingParams(max_tokens=6, min_tokens=5, stop_token_ids=(first[2],)))
    out = drain(e)
    assert out["stop"][0] == first[:3] and out["stop"][1].finish_reason == "stop"
    assert out["min"][0] == first and out["min"][1].finish_reason == "length"
