"""Running a script inside a network namespace that has only `lo`, so Ray binds 127.0.0.1 and no
byte leaves the machine. Every test and benchmark that starts Ray goes through here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import cache

from tests.waits import HANG_S


@cache
def netns_problem() -> str | None:
    """Why a loopback-only namespace cannot be made here, or None when it can."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs `unshare` and `ip` (util-linux, iproute2)"
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up && ip -o link show | wc -l"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )
    if probe.returncode != 0:
        return f"`unshare -n` is not permitted here: {probe.stderr.strip()[:200]}"
    if probe.stdout.strip() != "1":
        return "the new network namespace has more than `lo`"
    return None


def ray_problem() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install 'agentic-harness[ray]')"
    return netns_problem()


def run_isolated(args: list[str], *, timeout: float, cwd=None) -> subprocess.CompletedProcess:
    """`python args...` inside a fresh loopback-only network namespace."""
    script = 'ip link set lo up && exec "$0" "$@"'
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", script, sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )
