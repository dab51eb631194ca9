"""The client checks itself: how late its event loop ran and how busy its thread was.

A probe asks the event loop to run it every `interval_s`; how much later than asked it ran is the
loop's lag (the time any stream's bytes, or any due send, waited for the driver's own work). Once
a second the probe also notes the CPU seconds of the loop's thread (`time.thread_time`: an
in-process engine's step thread is not counted) and of the whole process. Send lag
(`t_sent - t_scheduled`) is in every record already. The raw samples go to `client.json` in the
run folder; the analyzer judges them over the measured window (harness.analysis.client_check).
A Ray run's workers each sample their own loop; the coordinator writes them all into one
`client.json` (`workers`), and the analyzer judges the worst.

With the CPU the probe notes the host's state (Linux `/proc`): the 1-minute load average, the
run queue (runnable tasks) and the CPU time stolen by the hypervisor, so a late loop can be told
apart: the driver's own work, or a host too busy to run it. It also notes how long this
process's threads waited on a run queue (`ThreadWaits`, Linux `/proc/self/task/*/schedstat`):
the host's contention as this process felt it, where the load average counts the run's own
threads (an in-process engine) as much as other work's.
"""

from __future__ import annotations

import asyncio
import os
import time
from array import array
from pathlib import Path

import orjson

from harness.atomic import write_atomic
from harness.schema import CLIENT_FILE

CLIENT_VERSION = 1


class LoopProbe:
    """Samples event-loop lag every `interval_s` and CPU time every `cpu_every_s`; times are
    perf_counter values until `as_dict(t0)` puts them on the run clock."""

    def __init__(self, interval_s: float = 0.05, cpu_every_s: float = 1.0) -> None:
        self.interval_s, self.cpu_every_s = interval_s, cpu_every_s
        # 8 bytes a sample, not a float object and a list slot (32): a probe ticks 20 times a
        # second for the whole run (a 30-minute soak: 36k samples a series)
        self.lag_t = array("d")
        self.lag_s = array("d")
        self.cpu_t = array("d")
        self.loop_cpu_s = array("d")
        self.process_cpu_s = array("d")
        self.host = HostProbe()
        self.waits = ThreadWaits()
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._next_cpu = 0.0
        self._cpu0 = (0.0, 0.0)

    def start(self) -> None:
        self._cpu0 = (time.thread_time(), time.process_time())
        self._note_cpu(time.perf_counter())
        self._arm(time.perf_counter())

    def _arm(self, now: float) -> None:
        self._due = now + self.interval_s
        self._handle = asyncio.get_running_loop().call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.lag_t.append(self._due)
        self.lag_s.append(round(max(0.0, now - self._due), 6))
        if now >= self._next_cpu:
            self._note_cpu(now)
        self._arm(now)

    def _note_cpu(self, now: float) -> None:
        self.cpu_t.append(now)
        self.loop_cpu_s.append(round(time.thread_time() - self._cpu0[0], 6))
        self.process_cpu_s.append(round(time.process_time() - self._cpu0[1], 6))
        self.host.sample()
        self.waits.sample()
        self._next_cpu = now + self.cpu_every_s

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._note_cpu(time.perf_counter())

    def as_dict(self, t0: float) -> dict:
        return {
            "client_version": CLIENT_VERSION,
            "probe_interval_s": self.interval_s,
            "loop_lag": {"t": [round(t - t0, 4) for t in self.lag_t], "lag_s": list(self.lag_s)},
            "cpu": {
                "t": [round(t - t0, 4) for t in self.cpu_t],
                "loop_thread_s": list(self.loop_cpu_s),
                "process_s": list(self.process_cpu_s),
            },
            "host_load": self.host.as_dict(),  # one sample per cpu sample, at the same times
            "thread_waits": self.waits.as_dict(),  # likewise
        }


class HostProbe:
    """The host's load beside the driver's own CPU: load average, run queue, stolen CPU time.
    Reads `/proc/loadavg` and `/proc/stat` (a few microseconds); elsewhere it records nothing."""

    def __init__(self) -> None:
        self.load1: list[float] = []
        self.runnable: list[int] = []
        self.steal_s: list[float] = []
        self.total_s: list[float] = []
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.available = Path("/proc/loadavg").is_file() and Path("/proc/stat").is_file()

    def sample(self) -> None:
        if not self.available:
            return
        try:
            load = Path("/proc/loadavg").read_text().split()
            with open("/proc/stat", "rb") as fh:
                cpu = [int(x) for x in fh.readline().split()[1:9]]
        except (OSError, ValueError, IndexError):
            self.available = False
            return
        self.load1.append(float(load[0]))
        self.runnable.append(int(load[3].split("/")[0]))
        self.steal_s.append(
            round(cpu[7] / self._tick, 3)
        )  # user nice system idle iowait irq softirq steal
        self.total_s.append(round(sum(cpu) / self._tick, 3))

    def as_dict(self) -> dict | None:
        if not self.load1:
            return None
        return {
            "cpus": os.cpu_count(),
            "load1": self.load1,
            "runnable": self.runnable,
            "steal_s": self.steal_s,
            "cpu_total_s": self.total_s,
        }


class ThreadWaits:
    """How long this process's threads ran and waited on a run queue, summed over its threads.

    `/proc/self/task/<tid>/schedstat` holds a thread's nanoseconds on a CPU, nanoseconds runnable
    but waiting for one, and its timeslices, since the thread began. Each sample adds, per thread,
    what it gained since it was first seen: a thread there at the first sample from that sample's
    values, one that began later from zero; a thread that ended keeps what it had. Waiting is the
    host's contention as this process felt it (other work's threads, or its own beyond the CPUs),
    whatever the load average says: `wait / (run + wait)` is the share of the time the process
    wanted a CPU and had none. Without schedstat (not Linux, or a kernel without schedstats)
    it records nothing."""

    def __init__(self, task_dir: str | Path = "/proc/self/task") -> None:
        self.task_dir = Path(task_dir)
        self.run_s: list[float] = []
        self.wait_s: list[float] = []
        self.threads: list[int] = []
        self._first: dict[str, tuple[int, int]] = {}
        self._last: dict[str, tuple[int, int]] = {}
        self.available = (self.task_dir / str(os.getpid()) / "schedstat").is_file() or any(
            self.task_dir.glob("*/schedstat")
        )

    def sample(self) -> None:
        if not self.available:
            return
        now = self._read()
        first_sample = not self._first
        for tid, values in now.items():
            self._first.setdefault(tid, values if first_sample else (0, 0))
            self._last[tid] = values
        run = sum(self._last[t][0] - self._first[t][0] for t in self._last)
        wait = sum(self._last[t][1] - self._first[t][1] for t in self._last)
        self.run_s.append(round(run / 1e9, 4))
        self.wait_s.append(round(wait / 1e9, 4))
        self.threads.append(len(now))

    def _read(self) -> dict[str, tuple[int, int]]:
        out = {}
        for path in self.task_dir.glob("*/schedstat"):
            try:
                fields = path.read_text().split()
                out[path.parent.name] = (int(fields[0]), int(fields[1]))
            except (OSError, ValueError, IndexError):
                continue  # the thread ended between the listing and the read
        return out

    def as_dict(self) -> dict | None:
        if not self.run_s:
            return None
        return {"run_s": self.run_s, "wait_s": self.wait_s, "threads": self.threads}


def write_client_check(
    run_dir: str | Path, probe: LoopProbe, t0: float, *, name: str = CLIENT_FILE
) -> Path:
    return write_client_samples(run_dir, probe.as_dict(t0), name=name)


def write_worker_checks(run_dir: str | Path, workers: list[dict]) -> Path:
    """A Ray run's `client.json`: each worker's own samples (`LoopProbe.as_dict` plus `worker`,
    `host`), all on the shared run clock; the analyzer judges the worst of them."""
    return write_client_samples(run_dir, {"client_version": CLIENT_VERSION, "workers": workers})


def write_client_samples(run_dir: str | Path, samples: dict, *, name: str = CLIENT_FILE) -> Path:
    """Atomically, like the manifest: a reader never sees half a file (nor, on a full disk, an
    empty .tmp: the error is raised with it removed)."""
    path = Path(run_dir) / name
    return write_atomic(path, orjson.dumps(samples))
