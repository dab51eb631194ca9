"""Local `harness serve` processes for scenarios that test the engine over real HTTP.

Each replica is its own process (its own GIL, its own KV cache), started on 127.0.0.1 with
`--port 0`; the process prints `serving on URL` once ready. Everything started here is stopped
in `stop()`, which `LocalServers` as a context manager always calls, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import harness
from harness.app.commands.serve import engine_flags
from harness.errors import EngineError

_READY = re.compile(r"serving on (http://\S+)")
_STORE_READY = re.compile(r"kv store on (http://\S+)")


def child_env() -> dict[str, str]:
    """The environment of a child harness: this harness's own package first on its path."""
    here = str(Path(harness.__file__).resolve().parents[1])  # the folder holding harness/
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the harness dies (even by kill -9), on Linux."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere: stop() ends them, and a killed harness leaves them


class LocalServers:
    def __init__(
        self, options: dict, replicas: int = 1, *, log_dir: Path, startup_timeout_s: float = 180.0
    ) -> None:
        self.argv = [
            sys.executable,
            "-P",  # no cwd on the path: a folder named `harness` there must not shadow this one
            "-m",
            "harness",
            "serve",
            "--port",
            "0",
            *engine_flags(options),
        ]
        self.replicas = replicas
        self.log_dir = Path(log_dir)
        self.startup_timeout_s = startup_timeout_s
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        self.urls: list[str] = []
        self.ready_pattern = _READY
        self.log_name = "server-{i}.log"

    def __enter__(self) -> LocalServers:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for i in range(self.replicas):
            log = self.log_dir / self.log_name.format(i=i)
            self.logs.append(log)
            with log.open(
                "w"
            ) as out:  # the child keeps its own handle; a pipe could fill and block it
                # Own session: the terminal's Ctrl-C reaches only the harness, which stops these.
                self.procs.append(
                    subprocess.Popen(
                        self.argv,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        env=child_env(),
                        preexec_fn=_die_with_parent,
                    )
                )
        self.urls = [self._wait_ready(p, log) for p, log in zip(self.procs, self.logs, strict=True)]

    def _wait_ready(self, proc: subprocess.Popen, log: Path) -> str:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            match = self.ready_pattern.search(text)
            if match:
                return match.group(1)
            if proc.poll() is not None:
                lines = text.strip().splitlines()
                raise EngineError(
                    f"the reference engine server exited ({lines[-1] if lines else proc.returncode}); see {log}"
                )
            time.sleep(0.1)
        raise EngineError(
            f"the reference engine server did not start in {self.startup_timeout_s:.0f} s; see {log}"
        )

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.procs = []


class LocalKVStore(LocalServers):
    """One `harness kv-store` process for a run whose replicas share a store (`kv_store: local`)."""

    def __init__(self, *, log_dir: Path, capacity_blocks: int = 1_048_576) -> None:
        super().__init__({}, 1, log_dir=log_dir)
        self.argv = [sys.executable, "-P", "-m", "harness", "kv-store", "--port", "0"]
        self.argv += ["--capacity-blocks", str(capacity_blocks)]
        self.ready_pattern = _STORE_READY
        self.log_name = "kv-store.log"

    @property
    def url(self) -> str:
        return self.urls[0]
