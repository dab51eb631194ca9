"""Greedy outputs are identical whatever the cache, budget, prefill cap or preemption (CPU fp32)."""

from __future__ import annotations

import pytest

from harness.engine.engine import LLMEngine

from .conftest import drain, greedy, prompt, tiny

pytestmark = pytest.mark.slow  # seconds to a minute each on 2 cores: `tox -e fast` skips it

SHARED = prompt(0, 75)


def workload() -> list[tuple[str, list[int], int]]:
    """Requests that share prefixes (forks of one context, an exact repeat) and some that don't."""
    reqs = [(f"fork{i}", SHARED + prompt(10 + i, 20 + 9 * i), 6 + i) for i in range(3)]
    reqs.append(("repeat", SHARED + prompt(10, 20), 6))
    reqs.append(("other", prompt(1, 130), 9))
    reqs.append(("short", prompt(2, 5), 12))
    return reqs


def run(engine: LLMEngine) -> dict[str, list[int]]:
    for rid, p, n in workload():
        engine.add_request(rid, p, greedy(n))
    out = drain(engine)
    return {rid: toks for rid, (toks, _) in out.items()}


@pytest.fixture(scope="module")
def reference(shared_runner) -> dict[str, list[int]]:
    """Each request alone, no prefix caching, whole prompt in one step."""
    result = {}
    for rid, p, n in workload():
        e = LLMEngine(tiny(enable_prefix_caching=False), runner=shared_runner)
        e.add_request(rid, p, greedy(n))
        result[rid] = drain(e)[rid][0]
    return result


CASES = {
    "batched": {},
    "no-cache": dict(enable_prefix_caching=False),
    "budget-16": dict(max_num_batched_tokens=16),
    "budget-50-no-cache": dict(max_num_batched_tokens=50, enable_prefix_caching=False),
    "long-prefill-cap": dict(long_prefill_token_threshold=24, max_num_batched_tokens=64),
    "prefill-interval": dict(prefill_schedule_interval=2, max_num_batched_tokens=40),
    "block-size-8": dict(block_size=8, num_gpu_blocks=512),
    "max-seqs-2": dict(max_num_seqs=2),
    # the forks hit the first fork's blocks in the step that computes them (vLLM's rule)
    "cache-at-schedule": dict(cache_at_schedule=True),
}


@pytest.mark.parametrize("name", CASES)
def test_outputs_equal_the_reference(name, reference, shared_runner):
    cfg = tiny(**CASES[name])
    runner = shared_runner if cfg.block_size == 16 else None
    assert run(LLMEngine(cfg, runner=runner)) == reference


@pytest.mark.parametrize("cache,blocks", [(True, 9), (False, 11)])
def test_outputs_equal_the_reference_under_preemption(cache, blocks, reference, shared_runner):
    cfg = tiny(num_gpu_blocks=blocks, enable_prefix_caching=cache, max_num_batched_tokens=64)
    e = LLMEngine(cfg, runner=shared_runner)
    assert run(e) == reference
    assert e.stats().num_preemptions > 0


def test_outputs_equal_the_reference_with_a_cpu_tier(reference, shared_runner):
    # The second pass finds the first pass's blocks evicted to the CPU tier and copies them back.
    e = LLMEngine(tiny(num_gpu_blocks=16, cpu_offload_blocks=64), runner=shared_runner)
    assert run(e) == reference
    assert run(e) == reference
    assert e.stats().cpu_cache_hits > 0


def test_a_second_pass_hits_every_prompt_but_its_last_token(reference, shared_runner):
    e = LLMEngine(tiny(), runner=shared_runner)
    run(e)
    before = e.stats().prefix_cache_hits
    assert run(e) == reference
    hits = e.stats().prefix_cache_hits - before
    assert hits == sum((len(p) - 1) // 16 * 16 for _, p, _ in workload())


def test_the_model_is_hugging_face_llama(shared_runner):
    """Our decoder loads into transformers' LlamaForCausalLM and generates the same tokens."""
    pytest.importorskip("transformers", reason="transformers is the optional 'bench' extra")
    import torch

    from benchmarks.bench_engine import hf_model

    hf = hf_model("tiny", shared_runner.model)
    p = prompt(3, 90)
    with torch.inference_mode():
        want = hf.generate(torch.tensor([p]), max_new_tokens=6, min_new_tokens=6, do_sample=False)[
            0, 90:
        ]
    e = LLMEngine(tiny(max_num_batched_tokens=32), runner=shared_runner)
    e.add_request("a", p, greedy(6))
    assert drain(e)["a"][0] == want.tolist()


def test_sampling_with_temperature_is_seeded():
    from harness.engine.sequence import SamplingParams

    def sample(seed: int) -> list[int]:
        e = LLMEngine(tiny(num_gpu_blocks=16, seed=seed))
        e.add_request(
            "s", prompt(4, 40), SamplingParams(max_tokens=12, ignore_eos=True, temperature=1.5)
        )
        return drain(e)["s"][0]

    first = sample(0)
    assert sample(0) == first  # same seed, same draws
    e = LLMEngine(tiny(num_gpu_blocks=16))
    e.add_request("g", prompt(4, 40), greedy(12))
    assert drain(e)["g"][0] != first  # temperature really samples
