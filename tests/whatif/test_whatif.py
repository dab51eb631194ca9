"""`harness whatif`: a simulated quickstart replayed through the cache model reproduces itself,
and predicts a run at a smaller pool (where blocks are evicted and long prompts refused) that is
then simulated for real."""

import json
import shutil
from pathlib import Path

import pytest

from harness.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def _simulate(out: Path, blocks: int) -> dict:
    argv = ["simulate", str(QUICKSTART), "-o", str(out), "--quiet"]
    argv += [
        "--set",
        "load.max_duration_s=6",
        "--set",
        f"target.engine.options.num_gpu_blocks={blocks}",
    ]
    assert main(argv) == 0
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def ample(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("whatif") / "ample"
    _simulate(out, 20_000)
    return out


def _whatif(run: Path, out: Path, *sets: str) -> dict:
    argv = ["whatif", str(run), "-o", str(out), "--format", "json"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 0
    return json.loads((out / "whatif.json").read_text())


def test_whatif_reproduces_its_own_run(ample, tmp_path):
    doc = _whatif(ample, tmp_path, "target.engine.options.num_gpu_blocks=20000")
    measured, own = doc["measured"], doc["predicted_self"]
    assert own["cache_hit_rate"] == pytest.approx(measured["cache_hit_rate"], abs=1e-3)
    assert own["requests_ok"] == measured["requests_ok"]
    assert own["ttft_p50_s"] == pytest.approx(measured["ttft_p50_s"], rel=0.02)
    at_sends = doc["predicted_self_at_measured_sends"]  # exact steps: the same sends
    assert at_sends["cache_hit_rate"] == pytest.approx(own["cache_hit_rate"], abs=1e-3)
    assert doc["predicted"]["cache_hit_rate"] == pytest.approx(own["cache_hit_rate"])
    assert "modelled, not measured" in doc["note"]


def test_the_exact_replay_names_the_first_request_that_parts_from_the_run(ample, tmp_path):
    # Replayed once without jitter at its sends, the run is itself request by request; a copy of
    # it with one record's cached tokens changed parts from it at that request, and only there.
    blocks = "target.engine.options.num_gpu_blocks=20000"
    exact = _whatif(ample, tmp_path / "a", blocks)["predicted_self_exact"]
    assert exact["requests_as_measured"] == exact["requests_compared"] > 100
    assert exact["first_parting"] is None and "every request" in exact["words"]
    changed = tmp_path / "changed"
    shutil.copytree(ample, changed, ignore=shutil.ignore_patterns("whatif"))
    records = [json.loads(line) for line in (changed / "records.jsonl").read_text().splitlines()]
    hits = sorted((r for r in records if r.get("cached_tokens")), key=lambda r: r["t_sent"])
    target = hits[len(hits) // 2]
    target["cached_tokens"] -= 16
    (changed / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    exact = _whatif(changed, tmp_path / "b", blocks)["predicted_self_exact"]
    first = exact["first_parting"]
    assert first["request"] == target["request_id"]
    assert first["measured_cached"] == target["cached_tokens"] == first["replayed_cached"] - 16
    assert exact["requests_as_measured"] == exact["requests_compared"] - 1
    assert f"first parts from the run at {target['request_id']}" in exact["words"]


def test_the_exact_replay_keeps_the_runs_clock_where_the_model_would_not(ample, tmp_path):
    # The same run on a server twice as slow (every time in it doubled) and the same cost model
    # in its manifest: replayed on the model's time its TTFT is half the measured one; on the
    # run's own clock it is the measured one, and every request still caches what it cached.
    # (Half, or under: its sends spread twice as far, it queues less too.)
    slow = tmp_path / "slow"
    shutil.copytree(ample, slow, ignore=shutil.ignore_patterns("whatif"))
    records = [json.loads(line) for line in (slow / "records.jsonl").read_text().splitlines()]
    for r in records:
        for key in ("t_scheduled", "t_sent", "t_first_token", "t_last_token", "t_done"):
            r[key] = None if r[key] is None else 2 * r[key]
        r["chunk_times"] = [2 * t for t in r["chunk_times"]]
    (slow / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    manifest = json.loads((slow / "manifest.json").read_text())
    manifest["replay"]["max_duration"] *= 2
    (slow / "manifest.json").write_text(json.dumps(manifest))
    doc = _whatif(slow, tmp_path / "w", "target.engine.options.num_gpu_blocks=20000")
    measured, exact = doc["measured"], doc["predicted_self_exact"]
    modelled = doc["predicted_self_at_measured_sends"]["ttft_p50_s"]
    assert modelled < 0.55 * measured["ttft_p50_s"]
    assert exact["ttft_p50_s"] == pytest.approx(measured["ttft_p50_s"], rel=0.02)
    assert exact["requests_as_measured"] == exact["requests_compared"] > 100
    assert exact["clock"].startswith("the run's own clock")
    assert exact["steps_replayed"] == exact["steps_streamed"] > 100  # in step throughout
    # ... and says what the clock hides: the model's own steps took half the run's
    assert exact["model_over_run_step"]["p50"] == pytest.approx(0.5, rel=0.02)
    assert exact["steps_words"].startswith(
        f"{exact['steps_replayed']:,} steps replayed, {exact['steps_streamed']:,} streamed; "
        "the model's own step 0.50x the run's (5-95 %: "
    )


def test_whatif_at_a_smaller_pool_matches_a_run_there(ample, tmp_path):
    doc = _whatif(ample, tmp_path / "w", "target.engine.options.num_gpu_blocks=150")
    real = _simulate(tmp_path / "small", 150)
    predicted = doc["predicted"]
    assert predicted["setup"]["num_gpu_blocks"] == 150
    assert predicted["cache_hit_rate"] < doc["measured"]["cache_hit_rate"] - 0.2  # evictions
    assert predicted["cache_hit_rate"] == pytest.approx(real["cache_hit_rate"], abs=0.02)
    assert predicted["requests_refused"] == real["requests_failed"]  # prompts over the pool


def test_whatif_fitted_time_model_and_bad_keys(ample, tmp_path, capsys):
    argv = ["whatif", str(ample), "-o", str(tmp_path), "--time-model", "fitted"]
    assert main([*argv, "--set", "target.engine.options.num_gpu_blocks=20000"]) == 0
    text = capsys.readouterr().out
    assert "the run, as replayed" in text and "fitted to the run's step times" in text
    assert "  at measured sends" in text
    doc = json.loads((tmp_path / "whatif.json").read_text())
    assert doc["ttft_fit"]["per_attended_pair_s"] >= 0
    assert main([*argv, "--set", "target.engine.options.no_such_knob=1"]) == 2


def test_whatif_routing_over_replicas(ample, tmp_path):
    sticky = _whatif(ample, tmp_path / "s", "target.engine.replicas=2")
    spread = _whatif(
        ample, tmp_path / "r", "target.engine.replicas=2", "target.routing=round_robin"
    )
    assert spread["predicted"]["setup"]["routing"] == "round_robin"
    # sticky: sessions stay where their prefix is; spread: every replica computes each prefix
    own = sticky["predicted_self"]["cache_hit_rate"]
    assert sticky["predicted"]["cache_hit_rate"] == pytest.approx(own, abs=0.02)
    assert spread["predicted"]["cache_hit_rate"] < own - 0.02  # each replica misses once


def test_whatif_calibrated_time_model_replays_the_run_at_its_own_ttft(ample, tmp_path, capsys):
    argv = ["whatif", str(ample), "-o", str(tmp_path), "--time-model", "calibrated"]
    assert main([*argv, "--set", "target.engine.options.num_gpu_blocks=20000"]) == 0
    assert "so the run replays at its TTFT p50" in capsys.readouterr().out
    doc = json.loads((tmp_path / "whatif.json").read_text())
    own, measured = doc["predicted_self"]["ttft_p50_s"], doc["measured"]["ttft_p50_s"]
    assert own == pytest.approx(measured, rel=0.03)  # the p50 moves in steps: within a few %


def test_a_run_with_exact_steps_is_replayed_once(ample, tmp_path):
    doc = _whatif(ample, tmp_path, "target.engine.options.num_gpu_blocks=150")
    assert doc["draws"] == {
        "replays": 1,
        "step_jitter": 0.0,
        "source": "the run's consecutive decode gaps",
    }
    assert "cache_hit_rate_sd" not in doc["predicted"]


def test_jittered_replays_give_a_mean_and_a_spread(ample, tmp_path, capsys):
    argv = ["whatif", str(ample), "--set", "target.engine.options.num_gpu_blocks=150"]
    argv += ["--replays", "4", "--step-jitter", "0.3"]
    assert main([*argv, "-o", str(tmp_path / "a")]) == 0
    assert "replays: 4, each step's time jittered by sigma 0.300 (given)" in capsys.readouterr().out
    doc = json.loads((tmp_path / "a" / "whatif.json").read_text())
    predicted = doc["predicted"]
    lo, hi = predicted["cache_hit_rate_range"]
    assert predicted["replays"] == 4 and lo < hi  # the seeds drew different orders of events
    assert lo <= predicted["cache_hit_rate"] <= hi and predicted["cache_hit_rate_sd"] > 0
    assert main([*argv, "-o", str(tmp_path / "b")]) == 0  # the same seeds: the same figures
    again = json.loads((tmp_path / "b" / "whatif.json").read_text())
    assert again["predicted"] == predicted
    assert main([*argv[:4], "--replays", "0", "-o", str(tmp_path / "c")]) == 2
    assert main([*argv[:4], "--step-jitter", "-1", "-o", str(tmp_path / "c")]) == 2


def test_step_noise_reads_the_jitter_of_decode_steps():
    import numpy as np
    import pandas as pd

    from harness.whatif.fit import step_noise

    rng = np.random.default_rng(7)
    streams = []
    for _ in range(60):
        gaps = 0.04 * np.exp(0.05 * rng.standard_normal(30))
        gaps[10] += 0.5  # a step that ran a prefill: left out
        streams.append(np.cumsum(np.r_[1.0, gaps]))
    assert step_noise(pd.DataFrame({"chunk_times": streams})) == pytest.approx(0.05, rel=0.15)
    exact = pd.DataFrame({"chunk_times": [np.arange(20) * 0.04 + 1.0] * 5})
    assert step_noise(exact) == 0.0
    assert step_noise(pd.DataFrame({"chunk_times": [[1.0, 1.04]]})) == 0.0  # too short to say


def test_like_vllm_sets_its_rules_and_server_keys_override_them(ample, tmp_path):
    from harness.whatif.server import LIKE

    argv = ["whatif", str(ample), "--set", "target.engine.options.num_gpu_blocks=150"]
    argv += ["--like", "vllm", "--server", "free_order=block", "-o", str(tmp_path / "a")]
    assert main(argv) == 0
    doc = json.loads((tmp_path / "a" / "whatif.json").read_text())
    assert doc["server"] == {**LIKE["vllm"], "free_order": "block"}
    assert main([*argv[:4], "--like", "sglang", "-o", str(tmp_path / "b")]) == 2


@pytest.fixture(scope="module")
def scarce(tmp_path_factory) -> Path:
    """The quickstart where its pool is scarce (120 blocks: requests wait for pages)."""
    out = tmp_path_factory.mktemp("whatif") / "scarce"
    _simulate(out, 120)
    return out


@pytest.mark.slow
def test_step_times_are_read_from_the_streams_where_ttfts_hold_waits(scarce, tmp_path):
    # A TTFT fit here charges a prefill token ~1.9x what the simulated steps cost: a request
    # with more to compute also waits longer for pages. The streams show the steps themselves.
    from harness.analysis.loader import load_run
    from harness.engine.runners.cost_model import CostModel, StepShape
    from harness.whatif.fit import fit_time

    fit, cost = fit_time(load_run(scarce).ok), CostModel.load(None)
    assert fit.source == "steps" and fit.points >= 50
    fitted = fit.cost_model()  # the simulated run's own, from its streams alone
    assert fitted.per_token_s == pytest.approx(cost.per_token_s, rel=0.05)
    assert fitted.per_attended_s == pytest.approx(cost.per_attended_s, rel=0.05)
    decodes = StepShape(tokens=8, attended=8 * 2000, samples=8)
    prefill = StepShape(tokens=508, attended=500 * 1000 + 500 * 501 // 2 + 8 * 2000, samples=9)
    for shape in (decodes, prefill):
        assert fitted.step_seconds(shape) == pytest.approx(cost.step_seconds(shape), rel=0.05)
    doc = _whatif(scarce, tmp_path, "target.engine.options.num_gpu_blocks=120")
    assert doc["ttft_fit"]["source"] == "steps"
    at_sends = doc["predicted_self_at_measured_sends"]
    assert at_sends["ttft_p50_s"] == pytest.approx(doc["measured"]["ttft_p50_s"], rel=0.1)


def test_whatif_json_holds_the_regime_and_the_interval(ample, tmp_path, capsys):
    argv = ["whatif", str(ample), "-o", str(tmp_path)]
    assert main([*argv, "--set", "target.engine.options.num_gpu_blocks=110"]) == 0
    text = capsys.readouterr().out
    doc = json.loads((tmp_path / "whatif.json").read_text())
    regime, band = doc["predicted"]["regime"], doc["predicted"]["interval"]
    assert regime["pool_pages"] == 110 and regime["largest_request_pages"] > 0
    assert regime["pool_over_largest_request"] == pytest.approx(
        110 / regime["largest_request_pages"]
    )
    lo, hi = band["cache_hit_rate"]
    assert lo <= doc["predicted"]["cache_hit_rate"] <= hi
    assert regime["thrashing"] and band["regime_pp"] > 0  # 110 blocks: near the largest request
    assert "prediction unreliable below ~1.5x the largest request" in text
    own = doc["predicted_self"]
    assert not own["regime"]["thrashing"] and own["interval"]["regime_pp"] == 0
    lo, hi = own["interval"]["cache_hit_rate"]  # exact steps, one replay: the floor alone
    assert hi - lo == pytest.approx(2 * own["interval"]["floor_pp"] / 100)


@pytest.mark.slow
def test_the_report_shows_the_whatif_of_its_run(ample, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(ample, run)
    assert main(["whatif", str(run), "--set", "target.engine.options.num_gpu_blocks=110"]) == 0
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert "What-if: this run at another pool (modelled, not measured)" in page
    assert '<p class="warn">Regime: thrashing: the pool is' in page
    assert "on the run&#39;s clock" in page and "requests cached what the run cached" in page
    doc = json.loads((run / "whatif" / "whatif.json").read_text())
    lo, hi = doc["predicted"]["interval"]["cache_hit_rate"]
    assert f"{100 * lo:.2f}-{100 * hi:.2f} %" in page


def test_the_runs_clock_ends_a_step_where_the_runs_next_step_ended():
    import pandas as pd

    from harness.whatif.exact import RunClock

    streams = pd.DataFrame({"chunk_times": [[1.0, 1.1, 1.5], [1.1005, 1.5004, 3.0]]})
    clock = RunClock.of(streams)
    assert list(clock.ends) == [1.0, 1.1, 1.5, 3.0]  # one step's outputs: one end
    assert clock(0.2, 0.05) == pytest.approx(0.8)  # however long the model would take
    assert clock(1.1, 0.05) == pytest.approx(0.4)  # a step starting at an end: the next one
    assert clock(1.6, 9.0) == pytest.approx(1.4)
    assert clock(3.0, 0.05) == 0.05  # after the run's last step: the model's time
    assert RunClock.of(pd.DataFrame({"chunk_times": [[]]}))(0.0, 0.3) == 0.3
