"""Measuring the KV tiers' transfer costs on this machine, for the simulated runner's cost model.

Each tier's copy is timed at 1 to 32 pages; a line through the times gives a per-block latency
and a bandwidth (t = latency + bytes / bandwidth). CPU: the torch runner's own device-to-host and
host-to-device copies. Disk: the disk tier's own block files, written and read back as the tier
does (no fsync: a re-read may come from the page cache, as it does in a run). The remote store
is not measured (it is another machine's network): its default stays.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from harness.engine.tiers.disk import decode_file, encode_file

_REPS = 20
PAGES = (1, 4, 16, 32)  # copy sizes timed, in pages


def _fastest_s(fn: Callable[[], object]) -> float:
    """The fastest of `_REPS` timings: a copy's cost without the other jobs' preemptions."""
    fn()
    times = []
    for _ in range(_REPS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _fit(sizes: list[int], times: list[float]) -> dict[str, float]:
    """t = latency + bytes / bandwidth, least squares over the sizes timed; a fit that comes out
    without a positive slope (noise on a loaded machine) keeps the largest copy's bandwidth."""
    slope, intercept = np.polyfit(np.asarray(sizes, float), np.asarray(times), 1)
    if slope <= 0 or intercept < 0:
        return {"gb_s": float(sizes[-1] / times[-1] / 1e9), "latency_s": 0.0}
    return {"gb_s": float(1e-9 / slope), "latency_s": float(intercept)}


def _cost(write: dict[str, float], read: dict[str, float]) -> dict[str, float]:
    return {
        "write_gb_s": round(write["gb_s"], 3),
        "read_gb_s": round(read["gb_s"], 3),
        "latency_s": round((write["latency_s"] + read["latency_s"]) / 2, 9),
    }


def _copies(
    k_cache: torch.Tensor, n: int, sync: Callable[[], object]
) -> tuple[Callable[[], object], Callable[[], object]]:
    """n pages device-to-host, and host-to-device."""
    host = k_cache[:, :n].to("cpu", copy=True)

    def out() -> object:
        return k_cache[:, :n].to("cpu", copy=True), sync()

    def back() -> object:
        return k_cache[:, :n].copy_(host), sync()

    return out, back


def cpu_cost(k_cache: torch.Tensor, pages: tuple[int, ...] = PAGES) -> dict[str, float]:
    """Device <-> host copies of KV pages (a CPU device: a host memcpy)."""
    page_bytes = k_cache[:, 0].numel() * k_cache.element_size()
    sync = torch.cuda.synchronize if k_cache.is_cuda else (lambda: None)
    outs, backs = [], []
    for n in pages:
        out, back = _copies(k_cache, n, sync)
        outs.append(_fastest_s(out))
        backs.append(_fastest_s(back))
    sizes = [n * page_bytes for n in pages]
    return _cost(_fit(sizes, outs), _fit(sizes, backs))


def _file_times(path: Path, size: int) -> tuple[float, float]:
    data = bytes(size)
    write = _fastest_s(lambda: path.write_bytes(encode_file(b"k", b"t", data)))
    return write, _fastest_s(lambda: decode_file(b"k", path.read_bytes()))


def disk_cost(
    page_bytes: int, directory: str | None = None, pages: tuple[int, ...] = PAGES
) -> dict[str, float]:
    """Block files of 1 to 32 pages, written and read back with their checksum."""
    with tempfile.TemporaryDirectory(prefix="kv-calibrate-", dir=directory) as tmp:
        times = [_file_times(Path(tmp) / f"{n}.kv", page_bytes * n) for n in pages]
    sizes = [n * page_bytes for n in pages]
    return _cost(_fit(sizes, [w for w, _ in times]), _fit(sizes, [r for _, r in times]))
