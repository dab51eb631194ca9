"""Starting a benchmark's server: a script of ours that prints `PORT <n>` once it listens on
127.0.0.1 (tests/driver/sse_server.py, benchmarks/stamp_server.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_server(
    script: Path, *args: str, preexec_fn: Callable[[], None] | None = None
) -> tuple[subprocess.Popen, str]:
    """Run `script` with `args` in its own process; the process and its base URL."""
    cmd = [sys.executable, str(script), "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, preexec_fn=preexec_fn)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"
