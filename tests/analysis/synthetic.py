"""Seeded synthetic runs: many tasks with a subagent each, realistic enough for distribution tests.

`ttft_scale` multiplies every time to first token, which is how tests inject a regression.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.analysis.golden import MANIFEST, rec, write_run


def synthetic_records(
    n_tasks: int = 300, seed: int = 0, ttft_scale: float = 1.0, endpoints=("e1",)
) -> list[dict]:
    rng = np.random.default_rng(seed)
    out: list[dict] = []
    for task in range(n_tasks):
        t = float(rng.uniform(0, 60))
        prompt = 0
        for turn in range(3):
            t, prompt = _turn(out, rng, f"t{task}", turn, t, prompt, ttft_scale, endpoints)
            if turn == 0:  # a subagent spawned after turn 0; turn 1 joins it
                t_sub, _ = _turn(
                    out, rng, f"t{task}.sub", 0, t, 0, ttft_scale, endpoints, parent=f"t{task}"
                )
                t = max(t, t_sub)
            t += float(rng.exponential(0.5))
    return out


def _turn(out, rng, sid, turn, t, prompt, ttft_scale, endpoints, parent=None):
    prompt += int(rng.integers(200, 2000))
    n_out = int(rng.integers(8, 64))
    ttft = float(rng.lognormal(-1.5, 0.4)) * ttft_scale
    tpot = float(rng.lognormal(-4.0, 0.2))
    sizes = [1] + [int(x) for x in rng.integers(1, 4, size=n_out)]
    sizes = _cap(sizes, n_out)
    first = t + ttft
    times = list(first + np.cumsum([0.0] + [s * tpot for s in sizes[1:]]))
    ideal = (prompt - 1) // 16 * 16 if turn else 0
    cached = ideal if rng.random() > 0.1 else ideal // 2
    endpoint = endpoints[int(rng.integers(len(endpoints)))]
    out.append(
        rec(
            f"{sid}-{turn}",
            sid,
            turn,
            (t, t, first, times[-1], times[-1] + 0.001),
            (times, sizes),
            (prompt, sum(sizes), cached),
            (prompt, n_out, ideal),
            parent=parent,
            endpoint=endpoint,
        )
    )
    return times[-1] + 0.001, prompt + sum(sizes)


def _cap(sizes: list[int], total: int) -> list[int]:
    out, left = [], total
    for s in sizes:
        if left <= 0:
            break
        out.append(min(s, left))
        left -= out[-1]
    return out


def write_synthetic_run(path: Path, run_id: str, **kwargs) -> Path:
    manifest = {**MANIFEST, "run_id": run_id, "simulated": False, "n_gpus": 1}
    return write_run(path, synthetic_records(**kwargs), manifest)
