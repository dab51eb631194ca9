"""The one writer of a run folder's manifest.json and records.jsonl, for local and Ray runs.

`RunFolder(path, run_id, **fields)` refuses a folder that already holds records, writes the
manifest with status `running`, and appends records as requests end. While a replay runs,
`signals(replay)` turns the first Ctrl-C / SIGTERM into `replay.interrupt()` (before it sends:
the preflight cancelled) and a second one into KeyboardInterrupt. Server /metrics snapshots go into the manifest (`server_metrics`);
`close(status)` ends the run with a `RunStatus`. Used as a context manager, an exception closes
the run `interrupted` (Ctrl-C, cancellation) or `failed`. Nothing rewrites records.jsonl: the
analyzer derives everything else from the folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson

from harness.driver.live.signals import Interruptible, Signals
from harness.driver.manifest import new_manifest, now_iso
from harness.driver.recorder import Recorder
from harness.errors import RunFolderError, WriteError
from harness.schema import MANIFEST_FILE, RECORDS_FILE, RunStatus


def make_run_dir(path: str | Path) -> Path:
    """The run folder (and its parents) created, and a file can be written in it; else one line
    naming the folder and why: a file in the way, no such parent, no permission, a read-only
    file system."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise RunFolderError("names a file, not a run folder; choose another with -o", path=path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(path, exc, exc.filename) from None
    try:
        with tempfile.TemporaryFile(dir=path):  # nothing left behind: unnamed, or unlinked
            pass
    except OSError as exc:
        raise _unusable(path, exc, None) from None
    return path


def _unusable(path: Path, exc: OSError, culprit: str | None) -> RunFolderError:
    why = exc.strerror or type(exc).__name__
    if culprit is not None and Path(culprit) != path:
        why = f"{why}: {culprit}"
    if isinstance(exc, FileExistsError):  # a parent that is a file or a dangling link
        why = f"{culprit} is in the way: not a folder"
    return RunFolderError(
        f"cannot create or write the run folder ({why}); choose another with -o", path=path
    )


class RunFolder:
    def __init__(self, path: str | Path, run_id: str, **fields) -> None:
        self.path = make_run_dir(path)
        if (self.path / RECORDS_FILE).exists():
            raise RunFolderError(
                "already holds records; choose a new run folder", path=self.path / RECORDS_FILE
            )
        self.manifest = new_manifest(run_id, **fields)
        self.recorder = Recorder(self.path)
        self.status = RunStatus.RUNNING
        self._replay: Interruptible | None = None  # while signals(replay) holds
        self._phase = "preflight"  # what a signal interrupts when no replay is watched
        self._write_manifest()

    def write(self, rec: dict) -> None:
        self.recorder.write(rec)

    def counts(self) -> dict:
        return self.recorder.counts()

    def update(self, **fields) -> None:
        """Add or replace manifest keys (run-time facts: workers, clock origin, counts)."""
        self.manifest.update(fields)
        self._write_manifest()

    def add_server_metrics(self, when: str, snapshot: list[dict | None] | None) -> None:
        """`when`: "before" or "after"; one entry per endpoint (None: it had no /metrics)."""
        self.manifest.setdefault("server_metrics", {})[when] = snapshot
        self._write_manifest()

    @contextlib.contextmanager
    def signals(self, replay: Interruptible) -> Iterator[None]:
        """The first Ctrl-C / SIGTERM: `replay.interrupt()` while it sends, else the phase that
        waits (the preflight) is cancelled; the manifest names the signal (`signal`) and the
        phase (`stopped_in`). A second one: give up on the clean-up (`harness.driver.live.signals`)."""

        with contextlib.ExitStack() as stack:
            signals = Signals.current() or stack.enter_context(Signals().installed())
            if self._note not in signals.noted:
                signals.noted.append(self._note)
                stack.callback(signals.noted.remove, self._note)
            stack.enter_context(signals.watching(replay))
            self.recorder.on_failure = lambda exc: replay.stop("disk_full")
            self._replay = replay
            try:
                yield
            finally:
                self._replay, self._phase = None, "closing"

    def _note(self, name: str) -> None:
        """A signal came (its name): the manifest says which, and in which phase."""
        if not self.closed:
            phase = getattr(self._replay, "phase", "run") if self._replay else self._phase
            self.update(signal=name, stopped_in=phase)

    def check_written(self) -> None:
        """Raise `WriteError` (one line) if a record could not be written."""
        exc = self.recorder.failed
        if exc is not None:
            self.update(records_lost=self.recorder.lost)
            raise WriteError(
                f"{self.recorder.path}: cannot write ({exc.strerror or exc}); the run stopped at "
                f"the first failed write, {self.recorder.lost} records not kept"
            )

    def close(self, status: RunStatus | str, **fields) -> None:
        """End the run as `status`; if the last records could not be written, as failed
        (`stopped_by: disk_full`), raising `WriteError` once the manifest says so."""
        self.recorder.close()
        lost = self.recorder.failed is not None and RunStatus(status) is not RunStatus.FAILED
        if lost:
            status, fields = RunStatus.FAILED, {**fields, "stopped_by": "disk_full"}
        self.status = RunStatus(status)
        self.manifest.update(fields, status=self.status.value, ended_at=now_iso())
        self._write_manifest()
        if lost:
            self.check_written()

    @property
    def closed(self) -> bool:
        return self.status is not RunStatus.RUNNING

    def __enter__(self) -> RunFolder:
        signals = Signals.current()  # a signal before the replay (a /metrics scrape) is noted
        if signals is not None:
            signals.noted.append(self._note)
        return self

    def __exit__(self, kind, exc, tb) -> None:
        signals = Signals.current()
        if signals is not None and self._note in signals.noted:
            signals.noted.remove(self._note)
        if self.closed:
            return
        stopped = kind is not None and issubclass(kind, KeyboardInterrupt | asyncio.CancelledError)
        ending = {} if self.manifest.get("stopped_by") else {"stopped_by": _ending(exc, stopped)}
        if not stopped and exc is not None:
            ending["error"] = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
        self.close(RunStatus.INTERRUPTED if stopped else RunStatus.FAILED, **ending)

    def _write_manifest(self) -> None:
        """Atomically (write + rename), so a reader never sees half a manifest. On a full disk:
        over the old one in place (its pages are already there), else left as it was."""
        path = self.path / MANIFEST_FILE
        tmp = path.with_name(path.name + ".tmp")
        data = orjson.dumps(self.manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        try:
            tmp.write_bytes(data)
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            # in place only within the blocks the old one holds: a half-written manifest is worse
            if exc.errno != errno.ENOSPC or not path.exists():
                raise
            if len(data) > path.stat().st_blocks * 512:
                return
            with contextlib.suppress(OSError), path.open("r+b") as fh:
                fh.write(data)
                fh.truncate()


def _ending(exc: BaseException | None, stopped: bool) -> str:
    """The manifest's `stopped_by` for a run an exception ended."""
    if stopped:
        return "signal"
    disk_full = isinstance(exc, WriteError) or getattr(exc, "errno", None) == errno.ENOSPC
    return "disk_full" if disk_full else "error"
