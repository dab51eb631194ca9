"""Was the client the bottleneck? Send lag, event-loop lag and the driver's CPU share, judged.

Over the measured window: send lag is `t_sent - t_scheduled` of every sent request; loop lag and
CPU come from the driver's `client.json` (harness.driver.selfcheck). The client is *near
saturation* when its event loop's thread was busy more than `LOOP_CPU_SHARE` of the wall time
(AIPerf warns at 85 % for its workers), or the loop ran more than `LOOP_LAG_P99_S` late at p99;
*sends were late* when the p99 send lag passes `SEND_LAG_P99_S`. A Ray run's `client.json` holds
each worker's samples (`workers`): each is judged on its own and the worst worker's figures count. Either way latencies include
client queueing: add workers (`--workers`, Ray) or lower the load per process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.metrics import percentiles
from harness.analysis.run import read_optional_json
from harness.schema import CLIENT_FILE

SEND_LAG_P99_S = 0.050
LOOP_LAG_P99_S = 0.050
LOOP_CPU_SHARE = 0.85


def read_client(run_dir: Path) -> dict | None:
    return read_optional_json(Path(run_dir) / CLIENT_FILE)


def client_check(records: pd.DataFrame, client: dict | None, start: float, end: float) -> dict:
    """The self-check summary (`summary.json` `client`), with `warnings` when a threshold is crossed."""
    m = records[(records["phase"] == "measure") & records["t_sent"].notna()]
    send_lag = (m["t_sent"] - m["t_scheduled"]).to_numpy(dtype=float)
    out: dict[str, Any] = {
        "send_lag_s": percentiles(send_lag),
        "loop_lag_s": percentiles([]),
        "loop_cpu_share": None,
        "loop_cpu_share_max": None,
        "process_cpu_share": None,
        "thresholds": {
            "send_lag_p99_s": SEND_LAG_P99_S,
            "loop_lag_p99_s": LOOP_LAG_P99_S,
            "loop_cpu_share": LOOP_CPU_SHARE,
        },
    }
    if client and "workers" in client:
        out.update(_worst_worker(client["workers"], start, end))
    elif client:
        out.update(_loop(client, start, end))
    out["warnings"] = _judge(out)
    return out


def _worst_worker(workers: list[dict], start: float, end: float) -> dict:
    """A Ray run: each worker judged on its own samples; each figure is the worst worker's (loop
    lag: the worker with the highest p99), and `workers` lists them all."""
    each = [
        {"worker": w.get("worker"), "host": w.get("host"), **_loop(w, start, end)} for w in workers
    ]
    if not each:
        return {"workers": []}
    laggiest = max(each, key=lambda w: _or_low(w["loop_lag_s"]["p99"]))
    worst = {
        key: max((w[key] for w in each if w[key] is not None), default=None)
        for key in ("loop_cpu_share", "loop_cpu_share_max", "process_cpu_share")
    }
    return {"loop_lag_s": laggiest["loop_lag_s"], **worst, "workers": each}


def _or_low(value: float | None) -> float:
    return float("-inf") if value is None else value


def _loop(client: dict, start: float, end: float) -> dict:
    lag_t = np.asarray(client["loop_lag"]["t"], dtype=float)
    lag = np.asarray(client["loop_lag"]["lag_s"], dtype=float)
    inside = (lag_t >= start) & (lag_t <= end)
    cpu = client["cpu"]
    t = np.asarray(cpu["t"], dtype=float)
    loop_cpu, proc_cpu = (
        np.asarray(cpu["loop_thread_s"], dtype=float),
        np.asarray(cpu["process_s"], dtype=float),
    )
    return {
        "loop_lag_s": percentiles(lag[inside] if inside.any() else lag),
        "loop_cpu_share": _share(t, loop_cpu, start, end),
        "loop_cpu_share_max": _max_share(t, loop_cpu, start, end),
        "process_cpu_share": _share(t, proc_cpu, start, end),
    }


def _share(t: np.ndarray, cpu: np.ndarray, a: float, b: float) -> float | None:
    """CPU seconds per wall second over [a, b] (cumulative samples, interpolated)."""
    if t.size < 2:
        return None
    a, b = max(a, t[0]), min(b, t[-1])
    if not b > a:
        a, b = t[0], t[-1]
    if not b > a:
        return None
    return float((np.interp(b, t, cpu) - np.interp(a, t, cpu)) / (b - a))


def _max_share(t: np.ndarray, cpu: np.ndarray, a: float, b: float) -> float | None:
    """The busiest sampling interval (about a second) inside [a, b]."""
    inside = (t >= a) & (t <= b)
    tt, cc = t[inside], cpu[inside]
    if tt.size < 2:
        return None
    dt = np.diff(tt)
    shares = np.diff(cc)[dt > 0] / dt[dt > 0]
    return float(shares.max()) if shares.size else None


def _judge(c: dict) -> list[str]:
    out = []
    send_p99, loop_p99 = c["send_lag_s"]["p99"], c["loop_lag_s"]["p99"]
    if send_p99 is not None and send_p99 > SEND_LAG_P99_S:
        out.append(
            f"client: sends were late (send lag p99 {send_p99 * 1e3:.1f} ms > "
            f"{SEND_LAG_P99_S * 1e3:.0f} ms); latencies include client queueing"
        )
    share = c["loop_cpu_share"]
    if share is not None and share > LOOP_CPU_SHARE:
        out.append(
            f"client: near saturation (event-loop thread busy {share:.0%} of the time > "
            f"{LOOP_CPU_SHARE:.0%}); add workers (--workers, Ray) or lower the load per process"
        )
    if loop_p99 is not None and loop_p99 > LOOP_LAG_P99_S:
        out.append(
            f"client: event loop ran late (loop lag p99 {loop_p99 * 1e3:.1f} ms > "
            f"{LOOP_LAG_P99_S * 1e3:.0f} ms); stream timings include the driver's own delay"
        )
    return out
