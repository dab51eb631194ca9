"""Was the client the bottleneck? Send lag, event-loop lag and the driver's CPU share, judged.

Over the measured window: send lag is `t_sent - t_scheduled` of every sent request; loop lag and
CPU come from the driver's `client.json` (harness.driver.live.selfcheck). The client is *near
saturation* when its event loop's thread was busy more than `LOOP_CPU_SHARE` of the wall time
(AIPerf warns at 85 % for its workers), or the loop ran more than `LOOP_LAG_P99_S` late at p99;
*sends were late* when the p99 send lag passes `SEND_LAG_P99_S`. A Ray run's `client.json` holds
each worker's samples (`workers`): each is judged on its own and the worst worker's figures count. Either way latencies include
client queueing: add workers (`--workers`, Ray) or lower the load per process.

A late loop is blamed on what the samples show (`cause`): the driver's own work when its loop
thread was busy (at least `OWN_WORK_SHARE` of a core); the process's other threads (an in-process
engine's step thread holds the interpreter) when the process was busy and the loop was not; the
host when it was overloaded while neither was. Overloaded is measured on the process itself
where Linux records it: `run_queue_wait_share`, the share of the time this process's threads
wanted a CPU and waited on a run queue for one (`client.json` `thread_waits`), above
`WAIT_SHARE_HOST`; or more than `STEAL_SHARE` of the CPU time stolen. Only without that record
does the load average decide (load average or run queue above `HOST_LOAD_PER_CPU` per CPU): it
counts this process's own threads too, an in-process engine's among them, so on 2 CPUs it called
the host overloaded when other work's load was about 1 per CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.loader import read_optional_json
from harness.analysis.metrics import percentiles
from harness.schema import CLIENT_FILE

SEND_LAG_P99_S = 0.050
LOOP_LAG_P99_S = 0.050
LOOP_CPU_SHARE = 0.85
OWN_WORK_SHARE = 0.5  # loop-thread CPU share from which a late loop is the driver's own work
HOST_LOAD_PER_CPU = 1.5  # load average (or run queue) per CPU above which the host is overloaded
STEAL_SHARE = 0.10  # share of the host's CPU time stolen by the hypervisor
# Share of its wanted CPU time the process spent waiting for a CPU above which the host, not the
# driver, held it back: half the time it could have run, it could not.
WAIT_SHARE_HOST = 0.5


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
        "run_queue_wait_share": None,
        "thresholds": {
            "send_lag_p99_s": SEND_LAG_P99_S,
            "loop_lag_p99_s": LOOP_LAG_P99_S,
            "loop_cpu_share": LOOP_CPU_SHARE,
            "run_queue_wait_share": WAIT_SHARE_HOST,
        },
    }
    if client and "workers" in client:
        out.update(_worst_worker(client["workers"], start, end))
    elif client:
        out.update(_loop(client, start, end))
    out["cause"] = late_cause(out)
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
    worst["run_queue_wait_share"] = max(
        (w["run_queue_wait_share"] for w in each if w["run_queue_wait_share"] is not None),
        default=None,
    )
    return {
        "loop_lag_s": laggiest["loop_lag_s"],
        **worst,
        "host_load": laggiest["host_load"],
        "workers": each,
    }


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
        "host_load": _host(client.get("host_load"), t, start, end),
        "run_queue_wait_share": wait_share(client.get("thread_waits"), t, start, end),
    }


def wait_share(waits: dict | None, t: np.ndarray, start: float, end: float) -> float | None:
    """The share of the time the process's threads wanted a CPU that they waited for one, over
    [start, end] (cumulative samples taken with the CPU samples at times `t`)."""
    if not waits or not waits.get("run_s"):
        return None
    n = min(len(waits["run_s"]), t.size)
    run = _share(t[:n], np.asarray(waits["run_s"][:n], dtype=float), start, end)
    wait = _share(t[:n], np.asarray(waits["wait_s"][:n], dtype=float), start, end)
    if run is None or wait is None or run + wait <= 0:
        return None
    return float(wait / (run + wait))


def _host(host: dict | None, t: np.ndarray, start: float, end: float) -> dict | None:
    """The host over the window: load average and run queue (mean, max), the share of its CPU
    time stolen; samples taken with the CPU samples at times `t`."""
    if not host or not host.get("load1"):
        return None
    n = min(len(host["load1"]), t.size)
    inside = (t[:n] >= start) & (t[:n] <= end)
    inside = inside if inside.any() else np.ones(n, dtype=bool)

    def series(key: str) -> np.ndarray:
        return np.asarray(host[key][:n], dtype=float)[inside]

    load, runnable = series("load1"), series("runnable")
    steal, total = series("steal_s"), series("cpu_total_s")
    spent = total[-1] - total[0] if total.size > 1 else 0.0
    return {
        "cpus": host.get("cpus"),
        "load1_mean": float(load.mean()),
        "load1_max": float(load.max()),
        "load1_min": float(load.min()),
        "runnable_mean": float(runnable.mean()),
        "runnable_max": int(runnable.max()),
        "steal_share": float((steal[-1] - steal[0]) / spent) if spent > 0 else None,
    }


def host_overloaded(host: dict | None, wait: float | None = None) -> bool:
    """The process waited for a CPU more than `WAIT_SHARE_HOST` of the time, or the hypervisor
    stole more than `STEAL_SHARE`; without a wait share, the load average rule."""
    steal = ((host or {}).get("steal_share") or 0.0) > STEAL_SHARE
    if wait is not None:
        return wait > WAIT_SHARE_HOST or steal
    if not host or not host.get("cpus"):
        return False
    per_cpu = max(host["load1_mean"], host["runnable_mean"]) / host["cpus"]
    return per_cpu > HOST_LOAD_PER_CPU or (host.get("steal_share") or 0.0) > STEAL_SHARE


def late_cause(c: dict) -> str | None:
    """What a late loop or late sends are blamed on: "driver" (its loop thread was busy),
    "process" (its other threads were), "host" (overloaded), "unknown" (none of these),
    "unsampled" (the loop was not busy; the host's load was not recorded); None without samples."""
    share, process = c.get("loop_cpu_share"), c.get("process_cpu_share")
    if share is None:
        return None
    if share >= OWN_WORK_SHARE:
        return "driver"
    if process is not None and process - share >= OWN_WORK_SHARE:
        return "process"
    wait = c.get("run_queue_wait_share")
    if c.get("host_load") is None and wait is None:
        return "unsampled"
    return "host" if host_overloaded(c.get("host_load"), wait) else "unknown"


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


def host_line(host: dict | None) -> str:
    """'load average 11-17 on 2 CPUs, run queue up to 15, 0 % stolen'."""
    if not host:
        return "host load not sampled"
    lo, hi = host["load1_min"], host["load1_max"]
    load = f"{lo:.3g}" if round(lo, 1) == round(hi, 1) else f"{lo:.3g}-{hi:.3g}"
    steal = host.get("steal_share")
    stolen = "" if steal is None else f", {steal:.0%} of CPU time stolen"
    return f"load average {load} on {host['cpus']} CPUs, run queue up to {host['runnable_max']}{stolen}"


def _blame(c: dict) -> str:
    """Why timings were late, in words, from `late_cause`."""
    share = c.get("loop_cpu_share")
    cause = c.get("cause")
    if cause == "driver":
        return f"the driver's own delay (its event-loop thread used {share:.0%} of a CPU)"
    if cause == "process":
        return (
            f"the driver process's other threads (process CPU {c['process_cpu_share']:.0%}, its"
            f" loop thread {share:.0%}; an in-process engine's step thread holds the interpreter)"
        )
    if cause == "host":
        return (
            f"an overloaded host, not the driver ({_waited(c)}{host_line(c.get('host_load'))}; the driver's loop"
            f" thread used {share:.0%} of a CPU): run the driver where it gets a CPU of its own"
        )
    if cause == "unknown":
        return (
            f"neither the driver's loop ({share:.0%} CPU) nor the host ({host_line(c.get('host_load'))})"
            " was busy: a blocking call or a paused process"
        )
    if cause == "unsampled":
        return (
            f"a delay outside the driver's loop (it used {share:.0%} of a CPU; the host's load"
            " was not sampled)"
        )
    return "the driver's own delay"


def _waited(c: dict) -> str:
    wait = c.get("run_queue_wait_share")
    return "" if wait is None else f"its threads waited for a CPU {wait:.0%} of the time, "


def _judge(c: dict) -> list[str]:
    out = []
    send_p99, loop_p99 = c["send_lag_s"]["p99"], c["loop_lag_s"]["p99"]
    if send_p99 is not None and send_p99 > SEND_LAG_P99_S:
        out.append(
            f"client: sends were late (send lag p99 {send_p99 * 1e3:.1f} ms > "
            f"{SEND_LAG_P99_S * 1e3:.0f} ms); latencies include client queueing, from {_blame(c)}"
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
            f"{LOOP_LAG_P99_S * 1e3:.0f} ms); stream timings include {_blame(c)}"
        )
    return out
