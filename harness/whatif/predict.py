"""A what-if from a run folder: the run's own requests replayed twice through the cache model,
once as the measured server (which must reproduce the run) and once with the changes asked for.

What the measured server is comes from the run folder: a reference-engine run's manifest holds
its engine options; any other server is the engine's defaults at the server's detected cache
granularity (analysis.ideal.granularity), with what the folder cannot say given as `server`
(`--server num_gpu_blocks=N`, e.g. vLLM's `--num-gpu-blocks-override`; `preset=gemma3-270m` for
Gemma 3's sliding-window KV groups).

A real server's run is one draw of a noisy process (its steps' times vary on a shared host, and
where pages are scarce the order of events decides what is evicted), so a real server's run is
replayed `replays` times, each with its steps' times jittered by the run's own step noise
(`fit.step_noise`) from seeds 0, 1, ...: the prediction is their mean, with their spread and
range beside it. The run itself and the what-if use the same seeds, so the difference between them
is not the seeds'. A run whose steps were exact (the virtual clock) has no noise: one replay.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.ideal import granularity
from harness.analysis.loader import Run, load_run
from harness.engine.config import EngineConfig
from harness.engine.runners.cost_model import CostModel
from harness.errors import InputError
from harness.whatif.exact import RunClock, clock_figures, parting
from harness.whatif.fit import TtftFit, fit_time, step_noise
from harness.whatif.regime import interval, regime
from harness.whatif.replay import Outcome, Replay
from harness.whatif.requests import Prompts, ReplayRequest, replay_requests
from harness.whatif.server import Setup, base_setup, describe, like_server

CALIBRATION_STEPS, CALIBRATION_TOLERANCE = 8, 0.01
REPLAYS = 8  # jittered replays of a noisy run (module docstring)
NOTE = (
    "predicted by replaying the run's requests through the reference engine's cache model "
    "(step times as said above): modelled, not measured"
)


@dataclass(frozen=True)
class Draws:
    """How many replays, and each step's jitter (sigma of its log time about the model's)."""

    sigma: float
    replays: int
    source: str

    @classmethod
    def of(cls, run: Run, replays: int, sigma: float | None) -> Draws:
        if replays < 1:
            raise InputError(f"--replays {replays}: at least 1", field="--replays")
        if sigma is not None and sigma < 0:
            raise InputError(f"--step-jitter {sigma}: not negative", field="--step-jitter")
        source = "given"
        if sigma is None:
            sigma, source = step_noise(run.ok), "the run's consecutive decode gaps"
        return cls(sigma, replays if sigma > 0 else 1, source)

    def as_dict(self) -> dict:
        return {"replays": self.replays, "step_jitter": self.sigma, "source": self.source}


def whatif(
    run_dir: str | Path,
    changes: dict[str, Any],
    server: dict[str, Any],
    time_model: str = "auto",
    replays: int = REPLAYS,
    jitter: float | None = None,
    like: str | None = None,
) -> dict:
    server = like_server(server, like)
    run, prompts = _load(run_dir)
    grain = _granularity(run)
    base = base_setup(run, grain.block_size, server)
    target = base.changed(changes)
    requests = replay_requests(run.records, closed_loop=run.replay.load == "closed")
    fit = fit_time(run.ok)
    stop = _stop_sending_at(run)
    draws = Draws.of(run, replays, jitter)
    cost, source = _time_model(run, fit, time_model)
    if time_model == "calibrated":
        p50 = _measured(run)["ttft_p50_s"]
        cost, source = _calibrated(fit, p50, base, requests, prompts, stop, draws)
    own = _predict(base, requests, prompts, cost, fit, stop, draws)
    sends = _at_measured_sends(requests)
    at_sends = _predict(base, sends, prompts, cost, fit, stop, draws)
    once, parted, clock = _exact(run, base, sends, prompts, cost, stop)  # set beside the run
    exact = {**_rates(sends, once.outcomes, fit), **parted, **clock}
    other = _predict(target, requests, prompts, cost, fit, stop, draws)
    return {
        "note": NOTE,
        "run": str(run.path),
        "changes": changes,
        "server": server,
        "block_size": grain.block_size,
        "block_size_source": grain.source,
        "ttft_fit": fit.as_dict(),
        "time_model": source,
        "draws": draws.as_dict(),
        "measured": _measured(run),
        "predicted_self": _banded(own, base, requests, prompts),
        "predicted_self_at_measured_sends": _banded(at_sends, base, requests, prompts),
        "predicted_self_exact": exact,
        "predicted": _banded(other, target, requests, prompts),
    }


@dataclass
class ExactReplay:
    """The run replayed once exactly as itself: its requests, what each got, where it parts."""

    config: EngineConfig
    requests: list[ReplayRequest]
    prompts: Prompts
    outcomes: list[Outcome]
    parting: dict


def exact_replay(
    run_dir: str | Path,
    server: dict[str, Any],
    like: str | None = None,
    observe: Callable[[int, float, Any], None] | None = None,
) -> ExactReplay:
    """`predicted_self_exact`'s replay (at the measured sends, on the run's clock), `observe`
    called before every step (`Replay.observe`): for a reader who follows the cache model step
    by step."""
    run, prompts = _load(run_dir)
    base = base_setup(run, _granularity(run).block_size, like_server(server, like))
    sends = _at_measured_sends(replay_requests(run.records, run.replay.load == "closed"))
    cost, _ = _time_model(run, fit_time(run.ok), "auto")
    once, parted, _ = _exact(run, base, sends, prompts, cost, _stop_sending_at(run), observe)
    return ExactReplay(base.config, sends, prompts, once.outcomes, parted)


def _load(run_dir: str | Path) -> tuple[Run, Prompts]:
    run = load_run(run_dir)
    if run.trace is None:
        raise InputError(f"{run_dir}: no trace.jsonl; the what-if rebuilds prompts from it")
    return run, Prompts(run.trace, run.replay.salt)


def _banded(pred: dict, setup: Setup, requests: list[ReplayRequest], prompts: Prompts) -> dict:
    """A prediction with its setup, its pool's regime and its hit's interval (`regime.py`)."""
    r = regime(setup.config, requests, prompts)
    out = {**pred, "setup": describe(setup), "regime": r.as_dict()}
    if pred["cache_hit_rate"] is not None:
        out["interval"] = interval(pred["cache_hit_rate"], pred.get("cache_hit_rate_sd", 0.0), r)
    return out


def _at_measured_sends(requests: list[ReplayRequest]) -> list[ReplayRequest]:
    """Every request sent at its measured time, whatever the replayed server's speed: the run
    as itself with no drift in when sessions send, so what is left of its error is the cache
    model's (its rules and the order of events inside the engine), not the time model's."""
    return [dataclasses.replace(r, trigger=None, new_task=False) for r in requests]


def _time_model(run: Run, fit: TtftFit, choice: str) -> tuple[CostModel, str]:
    """The replay's step times: a simulated run's own cost model (its step times were that
    model's, exactly), else the one fitted to its step times (`fit.py`); `fitted` forces it."""
    engine = (run.manifest.get("target") or {}).get("engine") or {}
    if choice == "auto" and run.simulated and engine.get("runner") == "simulated":
        return CostModel.load(engine.get("cost_model")), "the run's own cost model (simulated)"
    return fit.cost_model(), _fitted(fit)


def _fitted(fit: TtftFit) -> str:
    if fit.source == "steps":
        return f"fitted to the run's step times ({fit.points} steps)"
    return "fitted to the run's TTFT (its streams show too few prefill steps)"


def _calibrated(
    fit: TtftFit,
    measured_p50: float | None,
    base: Setup,
    requests: list[ReplayRequest],
    prompts: Prompts,
    stop: float,
    draws: Draws,
) -> tuple[CostModel, str]:
    """The fitted step times with their prefill terms scaled so the run, replayed as itself,
    gives its own TTFT p50 (what a step does not hold: the server's time outside its steps, or
    a TTFT fit's queueing). A few replays (secant steps on the scale)."""
    if not measured_p50:
        return fit.cost_model(), f"{_fitted(fit)} (no TTFT to calibrate on)"
    scale, p50 = 1.0, None
    for _ in range(CALIBRATION_STEPS):
        cost = fit.scaled(scale).cost_model()
        p50 = _predict(base, requests, prompts, cost, fit, stop, draws)["ttft_p50_s"]
        if not p50 or abs(p50 / measured_p50 - 1) < CALIBRATION_TOLERANCE:
            break
        scale = min(max(scale * measured_p50 / p50, 0.02), 50.0)
    how = f"{_fitted(fit)}, prefill x{scale:.3g} so the run replays at its TTFT p50"
    return fit.scaled(scale).cost_model(), how


def _predict(
    setup: Setup,
    requests: list[ReplayRequest],
    prompts: Prompts,
    cost: CostModel,
    fit: TtftFit,
    stop: float,
    draws: Draws,
) -> dict:
    each = []
    for seed in range(draws.replays):
        replay = Replay(setup.config, cost, setup.replicas, setup.routing, stop, draws.sigma, seed)
        each.append(_rates(requests, replay.run(requests, prompts), fit))
    return _pooled(each)


def _exact(
    run: Run,
    setup: Setup,
    requests: list[ReplayRequest],
    prompts: Prompts,
    cost: CostModel,
    stop: float,
    observe: Callable[[int, float, Any], None] | None = None,
) -> tuple[Replay, dict, dict]:
    """The exact replay, `exact_replay`'s and whatif.json's: no jitter, on the run's clock where
    its steps are one server's (replicas stream theirs interleaved, none saying whose)."""
    clock = RunClock.of(run.ok) if setup.replicas == 1 else None
    replay = Replay(setup.config, cost, setup.replicas, setup.routing, stop, 0.0, 0)
    replay.observe, replay.clock = observe, clock
    replay.run(requests, prompts)
    parted = parting(requests, replay.outcomes, run.records)
    return replay, parted, clock_figures(clock, setup.replicas, replay.steps)


def _pooled(each: list[dict]) -> dict:
    """The replays' mean of each figure, and the hit rate's spread over them."""
    out: dict[str, Any] = {}
    for key in each[0]:
        values = [r[key] for r in each if r[key] is not None]
        mean = float(np.mean(values)) if values else None
        out[key] = round(mean) if mean is not None and key.startswith("requests_") else mean
    hits = [r["cache_hit_rate"] for r in each if r["cache_hit_rate"] is not None]
    if len(hits) > 1:
        out["cache_hit_rate_sd"] = float(np.std(hits, ddof=1))
        out["cache_hit_rate_range"] = [min(hits), max(hits)]
    out["replays"] = len(each)
    return out


def _rates(requests: list[ReplayRequest], outcomes: list[Outcome], fit: TtftFit) -> dict:
    counted = [
        o
        for r, o in zip(requests, outcomes, strict=True)
        if r.phase_measure and o.first_token is not None and not o.error
    ]
    prompt = np.array([o.prompt for o in counted], dtype=float)
    cached = np.array([o.cached or 0 for o in counted], dtype=float)
    replayed = np.array([o.ttft for o in counted], dtype=float)
    sent = sum(1 for o in outcomes if o.sent is not None)
    return {
        "cache_hit_rate": float(cached.sum() / prompt.sum()) if prompt.sum() > 0 else None,
        "ttft_p50_s": _p50(replayed),  # the fitted cost model's steps, queueing included
        "ttft_p50_s_unqueued": _p50(fit.ttft(prompt, cached)),  # the fitted line alone
        "requests_ok": len(counted),
        "requests_sent": sent,
        "requests_refused": sum(1 for o in outcomes if o.error),
    }


def _p50(values: np.ndarray) -> float | None:
    return float(np.median(values)) if len(values) else None


def _measured(run: Run) -> dict:
    ok = run.ok
    rep = ok[ok["cached_tokens"].notna()]
    prompt = float(rep["prompt_tokens"].sum())
    ttft = (ok["t_first_token"] - ok["t_sent"]).dropna().to_numpy(dtype=float)
    return {
        "cache_hit_rate": float(rep["cached_tokens"].sum()) / prompt if prompt > 0 else None,
        "ttft_p50_s": _p50(ttft),
        "requests_ok": int(len(ok)),
        "requests_sent": int(run.records["t_sent"].notna().sum()),
        "requests_refused": int((run.measured["status"] != "ok").sum()),
    }


def _granularity(run: Run) -> granularity.Granularity:
    ok = run.records[run.records["status"] == "ok"]
    cached = ok["cached_tokens"].to_numpy(dtype=float)
    trace_block = run.trace.header.block_size if run.trace is not None else None
    return granularity.decide(cached, run.manifest, trace_block, None)


def _stop_sending_at(run: Run) -> float:
    """When the measured run stopped sending: its max_duration. A run without one sent every
    request it had (the trace's end, max_sessions or max_requests: the replay holds just those
    requests), so none is held back, however much slower the replayed server is."""
    limit = (run.manifest.get("replay") or {}).get("max_duration")
    if isinstance(limit, int | float) and math.isfinite(limit):
        return float(limit)
    return math.inf
