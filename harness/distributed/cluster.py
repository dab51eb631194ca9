"""Getting a Ray cluster: the one already initialized in this process, an existing cluster, or
a new local one (shut down again at the end)."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from harness.errors import InputError

RAY_HINT = "the ray backend needs Ray: pip install 'agentic-harness[ray]'"


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise InputError(RAY_HINT, field="execution.backend") from exc
    return ray


@contextlib.contextmanager
def ray_cluster(address: str) -> Iterator:
    """`address`: "auto" = $RAY_ADDRESS or the cluster `ray start` made on this machine, else a
    new local one; "local" = always a new local one; anything else = that cluster's address
    (`host:6379`, `ray://host:10001`). A Ray already initialized in this process is used as is."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
    if address not in ("auto", "local"):
        kwargs["address"] = address
    elif address == "local":
        kwargs["address"] = "local"
    empty = tempfile.mkdtemp(prefix="harness-ray-")
    try:
        _init_from(empty, ray, kwargs, address)
        try:
            yield ray
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(empty, ignore_errors=True)


def _init_from(folder: str, ray, kwargs: dict[str, Any], address: str) -> None:
    """`ray.init` with `folder` (empty) as the working directory, then back to the caller's.

    Ray puts the driver's working directory first on every worker's `sys.path`, so a folder
    named `harness` there (a clone's parent folder) would shadow this package in the workers:
    an ImportError, or another version's code. From an empty folder the workers find the harness
    the driver runs, by its install or PYTHONPATH. The folder lasts as long as the cluster (a
    local cluster's processes start in it); the caller's working directory is back once Ray is
    up, so the run's relative paths mean what they meant.
    """
    here = os.getcwd()
    os.chdir(folder)
    try:
        ray.init(**kwargs)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise InputError(
            f"cannot connect to Ray at {address!r}: {exc}", field="execution.address"
        ) from None
    finally:
        os.chdir(here)


def worker_cpus(ray, workers: int) -> float:
    """CPUs each worker asks for: one, or an equal share when the cluster has fewer than
    `workers` (a replay worker waits on sockets more than it computes)."""
    total = float(ray.cluster_resources().get("CPU", 0.0))
    if total <= 0:
        return 0.0
    return min(1.0, round(total / workers, 3))


def check_reachable_from_nodes(ray, endpoints: Sequence[str]) -> None:
    """A loopback endpoint only works when every worker runs on this machine."""
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    if nodes <= 1:
        return
    for url in endpoints:
        if _is_loopback(urlsplit(url).hostname or ""):
            raise InputError(
                f"endpoint {url} is a loopback address but the Ray cluster has {nodes} nodes: "
                "workers on other machines cannot reach it; use an address every node can reach",
                field="target.endpoints",
            )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
