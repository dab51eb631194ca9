"""Measuring the KV tiers' transfer costs on this machine, for the simulated runner's cost model.

Each tier's copy is timed at one page and at 16 pages; the two times give a per-block latency and
a bandwidth (t = latency + bytes / bandwidth). CPU: the torch runner's own device-to-host and
host-to-device copies. Disk: the disk tier's own block files, written and read back as the tier
does (no fsync: a re-read may come from the page cache, as it does in a run). The remote store
is not measured (it is another machine's network): its default stays.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from harness.engine.disk_tier import decode_file, encode_file

_REPS = 20


def _median_s(fn: Callable[[], object]) -> float:
    fn()
    times = []
    for _ in range(_REPS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _fit(one_s: float, many_s: float, page_bytes: int, many: int) -> dict[str, float]:
    per_byte = max((many_s - one_s) / ((many - 1) * page_bytes), 1e-15)
    latency = max(one_s - page_bytes * per_byte, 0.0)
    return {"gb_s": 1e-9 / per_byte, "latency_s": latency}


def _cost(write: dict[str, float], read: dict[str, float]) -> dict[str, float]:
    return {
        "write_gb_s": round(write["gb_s"], 3),
        "read_gb_s": round(read["gb_s"], 3),
        "latency_s": round((write["latency_s"] + read["latency_s"]) / 2, 9),
    }


def cpu_cost(k_cache: torch.Tensor, many: int = 16) -> dict[str, float]:
    """Device <-> host copies of KV pages (a CPU device: a host memcpy)."""
    page_bytes = k_cache[:, 0].numel() * k_cache.element_size()
    sync = torch.cuda.synchronize if k_cache.is_cuda else (lambda: None)
    host = [k_cache[:, :n].to("cpu", copy=True) for n in (1, many)]

    def out(n: int) -> Callable[[], object]:
        return lambda: (k_cache[:, :n].to("cpu", copy=True), sync())

    def back(n: int, src: torch.Tensor) -> Callable[[], object]:
        return lambda: (k_cache[:, :n].copy_(src), sync())

    write = _fit(_median_s(out(1)), _median_s(out(many)), page_bytes, many)
    read = _fit(_median_s(back(1, host[0])), _median_s(back(many, host[1])), page_bytes, many)
    return _cost(write, read)


def _file_times(path: Path, size: int) -> tuple[float, float]:
    data = bytes(size)
    write = _median_s(lambda: path.write_bytes(encode_file(b"k", b"t", data)))
    return write, _median_s(lambda: decode_file(b"k", path.read_bytes()))


def disk_cost(page_bytes: int, directory: str | None = None, many: int = 16) -> dict[str, float]:
    """Block files of one page and of `many` pages, written and read back with their checksum."""
    with tempfile.TemporaryDirectory(prefix="kv-calibrate-", dir=directory) as tmp:
        times = {}
        for n in (1, many):
            times["w", n], times["r", n] = _file_times(Path(tmp) / f"{n}.kv", page_bytes * n)
    write = _fit(times["w", 1], times["w", many], page_bytes, many)
    read = _fit(times["r", 1], times["r", many], page_bytes, many)
    return _cost(write, read)
