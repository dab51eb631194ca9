"""The client's self-check: a starved event loop is reported, a normal run is not."""

import asyncio
import time

import orjson
import pytest

from harness.analysis.summary import analyze_run
from tests.driver.helpers import replay, sess, trace


def _trace():
    return trace(*[sess(f"s{i}", [(8, 4, 0.05)] * 6) for i in range(4)])


async def _hog(stop: asyncio.Event, busy_s: float = 0.08, every_s: float = 0.1) -> None:
    """Pins the event loop: `busy_s` of CPU in every `every_s` (as a driver doing too much).
    Counted in CPU time, not wall time: on a shared machine a wall-clock spin may be descheduled."""
    while not stop.is_set():
        end = time.thread_time() + busy_s
        while time.thread_time() < end:
            pass
        await asyncio.sleep(every_s - busy_s)


@pytest.mark.slow
async def test_a_normal_run_raises_no_client_warning(server, tmp_path):
    """The driver's own work leaves its loop mostly idle, judged in CPU seconds (which a busy
    host does not raise): over the run, the loop thread (the in-process server's work
    included) used less CPU than 85 % (the saturation line) of the shortest the run can take,
    its think times (5 x 0.05 s). A busy host makes the loop late too: the warning then blames
    the host (that judgement is tested on given samples below)."""
    await replay(_trace(), server.url, tmp_path, concurrency=4)
    loop_cpu = orjson.loads((tmp_path / "client.json").read_bytes())["cpu"]["loop_thread_s"]
    assert loop_cpu[-1] - loop_cpu[0] < 0.85 * 5 * 0.05, loop_cpu
    client = analyze_run(tmp_path)["client"]
    assert client["send_lag_s"]["count"] == 24 and client["loop_lag_s"]["count"] > 0
    assert 0 < client["loop_cpu_share"] < 0.85  # no "near saturation"
    assert client["cause"] not in ("driver", "process"), client
    assert not [w for w in client["warnings"] if "own delay" in w or "other threads" in w]


@pytest.mark.slow
async def test_a_starved_client_is_warned_about(server, tmp_path):
    stop = asyncio.Event()
    hog = asyncio.create_task(_hog(stop))
    try:
        await replay(_trace(), server.url, tmp_path, concurrency=4)
    finally:
        stop.set()
        await hog
    summary = analyze_run(tmp_path)
    client = summary["client"]
    # CPU share is CPU seconds per wall second: on a loaded shared machine a pinned loop may get
    # well under a core, so the lag is what this test can rely on; it is reported either way.
    assert client["loop_cpu_share"] is not None
    assert client["loop_lag_s"]["p99"] > 0.05
    assert client["send_lag_s"]["p99"] > 0.05
    assert any("event loop ran late" in w for w in client["warnings"])
    assert any("sends were late" in w for w in client["warnings"])
    assert set(client["warnings"]) <= set(summary["warnings"])


def test_a_busy_loop_thread_is_called_near_saturation():
    import pandas as pd

    from harness.analysis.client_check import client_check

    records = pd.DataFrame(
        {"phase": ["measure"] * 3, "t_sent": [1.0, 2.0, 3.0], "t_scheduled": [1.0, 2.0, 3.0]}
    )
    samples = {
        "loop_lag": {"t": [1.0, 2.0], "lag_s": [0.001, 0.002]},
        "cpu": {
            "t": [0.0, 1.0, 2.0, 3.0, 4.0],
            "loop_thread_s": [0.0, 0.9, 1.85, 2.8, 3.1],
            "process_s": [0.0, 1.0, 2.0, 3.0, 3.5],
        },
    }
    busy = client_check(records, samples, 0.0, 3.0)
    assert busy["loop_cpu_share"] > 0.9 and busy["loop_cpu_share_max"] >= 0.95
    assert [w for w in busy["warnings"] if "near saturation" in w]
    samples["cpu"]["loop_thread_s"] = [0.0, 0.3, 0.6, 0.9, 1.0]
    assert client_check(records, samples, 0.0, 3.0)["warnings"] == []


def test_a_ray_runs_worst_worker_is_judged():
    import pandas as pd

    from harness.analysis.client_check import client_check

    records = pd.DataFrame(
        {"phase": ["measure"] * 3, "t_sent": [1.0, 2.0, 3.0], "t_scheduled": [1.0, 2.0, 3.0]}
    )

    def worker(i: int, loop_cpu: list[float], lag: float) -> dict:
        return {
            "worker": i,
            "host": "h",
            "loop_lag": {"t": [1.0, 2.0], "lag_s": [lag, lag]},
            "cpu": {
                "t": [0.0, 1.0, 2.0, 3.0],
                "loop_thread_s": loop_cpu,
                "process_s": [0.0, 1.0, 2.0, 3.0],
            },
        }

    idle = worker(0, [0.0, 0.1, 0.2, 0.3], 0.001)
    busy = worker(1, [0.0, 0.95, 1.9, 2.85], 0.2)
    both = client_check(records, {"client_version": 1, "workers": [idle, busy]}, 0.0, 3.0)
    assert [w["worker"] for w in both["workers"]] == [0, 1]
    assert both["loop_cpu_share"] == pytest.approx(0.95) and both["loop_lag_s"][
        "p99"
    ] == pytest.approx(0.2)
    assert any("near saturation" in w for w in both["warnings"])
    assert any("event loop ran late" in w for w in both["warnings"])
    calm = client_check(records, {"client_version": 1, "workers": [idle, idle]}, 0.0, 3.0)
    assert calm["warnings"] == [] and calm["loop_cpu_share"] == pytest.approx(0.1)


def _late_loop(loop_cpu: list[float], process: list[float], load: list[float]) -> dict:
    import pandas as pd

    from harness.analysis.client_check import client_check

    records = pd.DataFrame(
        {"phase": ["measure"] * 3, "t_sent": [1.0, 2.0, 3.0], "t_scheduled": [1.0, 2.0, 3.0]}
    )
    samples = {
        "loop_lag": {"t": [1.0, 2.0, 3.0], "lag_s": [0.2, 0.3, 0.25]},
        "cpu": {"t": [0.0, 1.0, 2.0, 3.0], "loop_thread_s": loop_cpu, "process_s": process},
        "host_load": {
            "cpus": 2,
            "load1": load,
            "runnable": [int(x) for x in load],
            "steal_s": [0.0, 0.0, 0.0, 0.0],
            "cpu_total_s": [0.0, 2.0, 4.0, 6.0],
        },
    }
    return client_check(records, samples, 0.0, 3.0)


def test_a_late_loop_on_an_overloaded_host_is_blamed_on_the_host():
    # as measured here: load 11-17 on 2 cores, the driver's loop thread at 1 % of a CPU
    c = _late_loop([0.0, 0.01, 0.02, 0.03], [0.0, 0.02, 0.04, 0.06], [11.0, 13.0, 17.0, 15.0])
    assert c["cause"] == "host"
    assert c["host_load"]["load1_min"] == 11.0 and c["host_load"]["load1_max"] == 17.0
    late = next(w for w in c["warnings"] if "event loop ran late" in w)
    assert "an overloaded host, not the driver" in late and "load average 11-17 on 2 CPUs" in late
    assert "used 1% of a CPU" in late and "driver's own delay" not in late


def test_a_late_loop_that_was_busy_is_the_drivers_own_delay_whatever_the_host():
    c = _late_loop([0.0, 0.9, 1.8, 2.7], [0.0, 1.0, 2.0, 3.0], [11.0, 13.0, 17.0, 15.0])
    assert c["cause"] == "driver"
    assert any("the driver's own delay" in w for w in c["warnings"])


def test_a_late_loop_whose_process_was_busy_is_blamed_on_its_other_threads():
    c = _late_loop([0.0, 0.05, 0.1, 0.15], [0.0, 0.95, 1.9, 2.85], [1.0, 1.0, 1.0, 1.0])
    assert c["cause"] == "process"
    assert any("other threads" in w for w in c["warnings"])


def test_a_late_loop_on_a_quiet_host_names_neither():
    c = _late_loop([0.0, 0.05, 0.1, 0.15], [0.0, 0.06, 0.12, 0.18], [0.5, 0.4, 0.5, 0.6])
    assert c["cause"] == "unknown"
    assert any("a blocking call or a paused process" in w for w in c["warnings"])


def test_the_probe_samples_the_hosts_load_on_linux():
    from pathlib import Path

    from harness.driver.live.selfcheck import HostProbe

    if not Path("/proc/loadavg").is_file():
        pytest.skip("no /proc")
    probe = HostProbe()
    probe.sample()
    probe.sample()
    d = probe.as_dict()
    assert d is not None and len(d["load1"]) == 2 and d["cpus"] >= 1
    assert d["cpu_total_s"][1] >= d["cpu_total_s"][0] > 0 and d["runnable"][0] >= 1


def _waits(run_s: list[float], wait_s: list[float]) -> dict:
    return {"run_s": run_s, "wait_s": wait_s, "threads": [3] * len(run_s)}


def test_a_late_loop_whose_threads_waited_for_a_cpu_is_the_hosts_whatever_the_load():
    # a quiet load average (0.5) but the process's threads waited 3 s in every 4 s wanted
    c = _late_loop([0.0, 0.05, 0.1, 0.15], [0.0, 0.06, 0.12, 0.18], [0.5, 0.4, 0.5, 0.6])
    c2 = _with_waits(_waits([0.0, 0.25, 0.5, 0.75], [0.0, 0.75, 1.5, 2.25]))
    assert c["cause"] == "unknown" and c2["cause"] == "host"
    assert c2["run_queue_wait_share"] == pytest.approx(0.75)
    assert any("waited for a CPU 75% of the time" in w for w in c2["warnings"])


def test_a_loaded_host_whose_process_hardly_waited_is_not_blamed():
    # load 11-17 on 2 CPUs, yet the process's threads waited 10 % of the time they wanted a CPU
    c = _with_waits(
        _waits([0.0, 0.9, 1.8, 2.7], [0.0, 0.1, 0.2, 0.3]), load=[11.0, 13.0, 17.0, 15.0]
    )
    assert c["run_queue_wait_share"] == pytest.approx(0.1) and c["cause"] == "unknown"


def _with_waits(waits: dict, load: list[float] | None = None) -> dict:
    import pandas as pd

    from harness.analysis.client_check import client_check

    records = pd.DataFrame(
        {"phase": ["measure"] * 3, "t_sent": [1.0, 2.0, 3.0], "t_scheduled": [1.0, 2.0, 3.0]}
    )
    load = load or [0.5, 0.4, 0.5, 0.6]
    samples = {
        "loop_lag": {"t": [1.0, 2.0, 3.0], "lag_s": [0.2, 0.3, 0.25]},
        "cpu": {
            "t": [0.0, 1.0, 2.0, 3.0],
            "loop_thread_s": [0.0, 0.05, 0.1, 0.15],
            "process_s": [0.0, 0.06, 0.12, 0.18],
        },
        "host_load": {
            "cpus": 2,
            "load1": load,
            "runnable": [int(x) for x in load],
            "steal_s": [0.0] * 4,
            "cpu_total_s": [0.0, 2.0, 4.0, 6.0],
        },
        "thread_waits": waits,
    }
    return client_check(records, samples, 0.0, 3.0)


def test_thread_waits_count_a_real_threads_cpu_time_and_one_that_began_and_ended():
    import threading
    from pathlib import Path

    from harness.driver.live.selfcheck import ThreadWaits

    if not list(Path("/proc/self/task").glob("*/schedstat")):
        pytest.skip("no schedstat")
    waits = ThreadWaits()
    assert waits.available
    waits.sample()
    spin = 0.3  # CPU seconds a thread spends, counted in CPU time: a wall-clock spin on a shared
    # machine may be descheduled
    burnt, release = threading.Event(), threading.Event()

    def burn() -> None:
        end = time.thread_time() + spin
        while time.thread_time() < end:
            pass
        burnt.set()
        release.wait()  # alive, not running, until sampled

    worker = threading.Thread(target=burn)
    worker.start()
    burnt.wait()
    waits.sample()  # the worker is seen after its spin: a thread that began after the first
    release.set()
    worker.join()
    waits.sample()  # the worker has ended: what it had when last seen is kept
    d = waits.as_dict()
    assert d is not None and len(d["run_s"]) == 3
    assert d["run_s"][0] == 0 and d["wait_s"][0] == 0  # each thread from its first sample
    assert d["run_s"][1] >= spin * 0.9  # counted from zero: it began after the first sample
    assert d["run_s"][2] >= d["run_s"][1]  # the ended thread's run time is still counted
    assert d["wait_s"][2] >= d["wait_s"][1] >= 0
    assert d["threads"][1] >= 2 and d["threads"][2] < d["threads"][1] + 1


def test_thread_waits_record_nothing_without_schedstat(tmp_path):
    from harness.driver.live.selfcheck import ThreadWaits

    waits = ThreadWaits(tmp_path)
    waits.sample()
    assert not waits.available and waits.as_dict() is None
