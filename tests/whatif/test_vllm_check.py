"""benchmarks/whatif_vllm_check.py's choices, held out by construction: the seed it draws, the
pools it takes from the base run, and the table it prints from check.json."""

from __future__ import annotations

from benchmarks import whatif_vllm_check as check


def test_a_drawn_seed_is_never_one_the_model_was_developed_on(monkeypatch):
    draws = iter([check.DEVELOPMENT_SEEDS[1] - 3, 41 - 3])  # the first draw hits seed 2
    monkeypatch.setattr(check.secrets, "randbelow", lambda n: next(draws))
    assert check.draw_seed(None) == (41, "drawn by the command")
    assert check.draw_seed(2) == (2, "given")  # said so in check.json and the table


def test_pools_are_ratios_of_the_largest_request_and_vllm_can_start_at_each():
    assert check.vllm_minimum(2048) == 16 + 5 * 17 + 1  # Gemma 3: SlidingWindowSpec's bound, null
    rows = check.pools(97, [2.0, 1.5, 1.1, 1.0], floor=check.vllm_minimum(2048))
    assert [r["pages"] for r in rows] == [194, 146, 107, 102]  # 97 pages: under vLLM's floor


def test_a_runs_preemptions_are_its_own_not_the_servers_since_start():
    # vLLM starts once per pool: its counter after a pool's second run holds the first's too.
    assert (
        check.own_preemptions(
            {"before": [{"num_preemptions": 1.0}], "after": [{"num_preemptions": 1.0}]}
        )
        == 0
    )
    assert check.own_preemptions({"after": [{"num_preemptions": 2.0}]}) == 2.0
    assert check.own_preemptions({"before": [None], "after": [None]}) is None


def _run(hit: float, own: float) -> dict:
    return {
        "run": "/out/p107-r1",
        "cache_hit_rate": hit,
        "ttft_p50_s": 2.0,
        "preemptions": 1.0,
        "decode_step_s": 0.15,
        "self_at_measured_sends": {"cache_hit_rate": own, "ttft_p50_s": 2.2},
        "self_exact": {
            "cache_hit_rate": own + 0.01,
            "ttft_p50_s": 1.5,
            "requests_compared": 200,
            "requests_as_measured": 190,
            "words": "first parts from the run at s000001:4 (sent 12.00 s): measured 0, ...",
        },
    }


PREDICTED = {
    "cache_hit_rate": 0.40,
    "cache_hit_rate_sd": 0.02,
    "ttft_p50_s": 2.5,
    "interval": {"cache_hit_rate": [0.31, 0.49]},
    "regime": {"words": "thrashing: the pool is 1.10x the largest request"},
}


def test_the_table_says_whether_the_runs_are_inside_the_interval():
    predicted = PREDICTED
    doc = {
        "seed": 41,
        "seed_source": "drawn by the command",
        "largest_request_pages": 97,
        "base_pool": 2730,
        "base": {"cache_hit_rate": 0.9, "ttft_p50_s": 0.7, "decode_step_s": 0.1},
        "pools": [
            {"ratio": 1.1, "pages": 107, "predicted": predicted, "measured": [_run(0.45, 0.44)]}
        ],
    }
    doc["pools"][0]["measured"].append({**_run(0.52, 0.51), "run": "/out/p107-r2"})
    text = "\n".join(check.table(doc))
    assert "seed 41 (drawn by the command); largest request 97 pages" in text
    row = next(line for line in text.splitlines() if line.startswith("| 107 (1.1x)"))
    assert "45.00 %, 52.00 %" in row and "| 1 of 2 |" in row and "| -8.50 pp |" in row
    assert "| thrashing |" in row and "| +25 % |" in row
    assert "| p107 p107-r2 | 52.00 % | 51.00 % | -1.00 pp |" in text
    assert "| 52.00 % (+0.00 pp), 1.500 s (-25 %) | 190 of 200; first parts" in text
    del doc["pools"][0]["measured"][0]["self_exact"]  # a check.json of an older tree
    assert "| 0.150 s | | |" in "\n".join(check.table(doc))
    assert check.table(doc) == check.table(doc)  # a pure function of check.json


def test_again_replays_each_run_from_the_folder_it_is_in_now(monkeypatch, tmp_path):
    # A check folder moved since: each run is found by its name under OUT, replayed at its own
    # pool and the check's max length, into its whatif-again, and its self rows replaced.
    calls = []

    def whatif(run, out, pages, server, max_len):
        calls.append((run, out, pages, server, max_len))
        own = {"cache_hit_rate": 0.5, "ttft_p50_s": 2.0}
        return {
            "predicted_self_at_measured_sends": own,
            "predicted_self_exact": {**own, "clock": "the run's own clock"},
            "ttft_fit": {"decode_step_s": 0.2},
        }

    monkeypatch.setattr(check, "whatif", whatif)
    doc = {"max_model_len": 2048, "pools": [{"pages": 107, "measured": [_run(0.45, 0.44)]}]}
    check.again(doc, tmp_path)
    run = tmp_path / "p107-r1"
    assert calls == [(run, run / "whatif-again", 107, (107, 2048), 2048)]
    got = doc["pools"][0]["measured"][0]
    assert got["self_exact"]["clock"] == "the run's own clock" and got["decode_step_s"] == 0.2
    assert got["cache_hit_rate"] == 0.45  # the run stays as measured
    got["self_exact"].update(requests_as_measured=10, requests_compared=10, words="every request")
    got["self_exact"]["steps_words"] = "1,308 steps replayed, 1,309 streamed"
    doc.update(seed=41, seed_source="given", largest_request_pages=97, base_pool=2730)
    doc["base"] = {"cache_hit_rate": 0.9, "ttft_p50_s": 0.7, "decode_step_s": 0.1}
    doc["pools"][0].update(ratio=1.1, predicted=PREDICTED)
    text = "\n".join(check.table(doc))
    assert "| 10 of 10; every request; 1,308 steps replayed, 1,309 streamed |" in text
