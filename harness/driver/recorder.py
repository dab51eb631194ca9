"""Records: one JSON object per request, appended to records.jsonl as it ends.

Inside an event loop the writes are batched: a record reaches the file (written and flushed)
within `FLUSH_S` of its request's end, or at once when `FLUSH_BYTES` are pending, and always on
`flush()` / `close()`, which the run folder calls on every way out (Ctrl-C, SIGTERM, errors).
Outside a loop every record is written and flushed at once.

`collect` sends a request through a target into a record (`RecordSink`); whatever happens (a
failure, a target bug, a cancellation) the record gets a status, so every request sent yields
exactly one record. The record is `harness.schema.Record`, made by `new_record`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from harness.driver import clock
from harness.driver.target import (
    Done,
    Event,
    Failure,
    Redirected,
    RequestSpec,
    Resent,
    Sent,
    Target,
    Usage,
)
from harness.schema import RECORDS_FILE, Record

_DUMP_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY


class RecordSink:
    """Fills one record from a target's reports (times made relative to the run clock's `t0`).

    `texts` collects the reply's text pieces when live history needs them.
    """

    __slots__ = ("rec", "t0", "texts", "_times", "_tokens")

    def __init__(self, rec: Record, t0: float, texts: list[str] | None = None) -> None:
        self.rec, self.t0, self.texts = rec, t0, texts
        self._times, self._tokens = rec["chunk_times"].append, rec["chunk_tokens"].append

    def chunk(self, t: float, tokens: int, text: str) -> None:
        self._times(t - self.t0)
        self._tokens(tokens)
        if self.texts is not None:
            self.texts.append(text)

    def event(self, ev: Event) -> None:
        rec = self.rec
        if isinstance(ev, Sent):
            rec["t_sent"] = round(ev.t - self.t0, 6)
        elif isinstance(ev, Usage):
            rec["prompt_tokens"], rec["completion_tokens"], rec["cached_tokens"] = (
                ev.prompt_tokens,
                ev.completion_tokens,
                ev.cached_tokens,
            )
            if ev.cached_tiers is not None:
                for tier, tokens in ev.cached_tiers.items():
                    rec[f"cached_tokens_{tier}"] = tokens  # type: ignore[literal-required]
            if ev.cache_writes is not None:
                (
                    rec["cache_creation_tokens"],
                    rec["cache_creation_5m_tokens"],
                    rec["cache_creation_1h_tokens"],
                ) = ev.cache_writes
            if ev.spec is not None:
                spec = ev.spec
                rec["spec_drafts"], rec["spec_draft_tokens"], rec["spec_accepted_tokens"] = (
                    spec.drafts,
                    spec.draft_tokens,
                    spec.accepted_tokens,
                )
        elif isinstance(ev, Done):
            rec["status"], rec["t_done"] = "ok", round(ev.t - self.t0, 6)
        elif isinstance(ev, Failure):
            _fail(rec, ev.status, ev.error_class, ev.message, ev.t - self.t0)
            if ev.retry_after_s is not None and rec["error"] is not None:
                rec["error"]["retry_after_s"] = ev.retry_after_s
            if ev.body is not None and rec["error"] is not None:
                rec["error"]["body"] = ev.body
        else:
            _wire_note(rec, ev)


def _wire_note(rec: Record, ev: Event) -> None:
    """A resend or a redirect into the record's `wire` (rare: off the per-chunk path)."""
    wire = rec["wire"] or {}
    if isinstance(ev, Resent):
        wire["resent"] = wire.get("resent", 0) + 1
        wire["resent_why"] = ev.why
    elif isinstance(ev, Redirected):
        wire.setdefault("redirects", []).append(f"{ev.status} {ev.url}")
    rec["wire"] = wire


async def collect(
    target: Target, req: RequestSpec, rec: Record, t0: float, texts: list[str] | None = None
) -> Record:
    """Send `req` through `target` into `rec` (see `RecordSink`): one status, whatever happens."""
    try:
        await target.stream(req, RecordSink(rec, t0, texts))
    except asyncio.CancelledError:
        _fail(
            rec,
            "cancelled",
            "Cancelled",
            "the run stopped while the request was in flight",
            clock.now() - t0,
        )
        raise
    except Exception as exc:  # a bug in a target must cost one request, not the run
        _fail(rec, "error", type(exc).__name__, f"target raised: {exc}", clock.now() - t0)
    finally:
        if rec["status"] is None:
            _fail(
                rec,
                "error",
                "NoTerminalEvent",
                "the target's stream ended without Done or Failure",
                clock.now() - t0,
            )
        times = rec["chunk_times"]
        if times:
            rec["t_first_token"], rec["t_last_token"] = times[0], times[-1]
    return rec


def ended_at(rec: Record) -> float:
    """When a collected request ended: `collect` gives every record its `t_done`."""
    t = rec["t_done"]
    if t is None:
        raise RuntimeError(f"record {rec['request_id']} was not collected")
    return t


def _fail(rec: Record, status: str, error_class: str, message: str, t: float) -> None:
    if rec["status"] is None:
        rec["status"], rec["error"], rec["t_done"] = (
            status,
            {"class": error_class, "message": message},
            round(t, 6),
        )


class OutcomeCounts:
    """Requests by status and failures by error class, as the run summary and manifest report."""

    def __init__(self) -> None:
        self.by_status: Counter[str] = Counter()
        self.by_error: Counter[str] = Counter()  # error class -> count (error and timeout)
        self.wire: Counter[str] = Counter()  # resent (a stale connection), redirected: not faults

    def observe(self, rec: Mapping[str, Any]) -> None:
        self.by_status[rec["status"]] += 1
        if rec["error"] is not None and rec["status"] != "cancelled":
            self.by_error[rec["error"]["class"]] += 1
        wire = rec.get("wire")
        if wire:
            self.wire["resent"] += wire.get("resent", 0)
            self.wire["redirected"] += bool(wire.get("redirects"))

    def counts(self) -> dict:
        """The manifest's `counts`; `wire` only where a request was resent or redirected."""
        out = {
            "requests": sum(self.by_status.values()),
            "by_status": dict(self.by_status),
            "errors_by_class": dict(self.by_error),
        }
        if any(self.wire.values()):
            out["wire"] = {k: v for k, v in self.wire.items() if v}
        return out


class Recorder(OutcomeCounts):
    """Appends records to `<run_dir>/records.jsonl` (batched, see above) and counts outcomes.

    A write that fails (a full disk) never raises from the loop's timer: the file is cut back to
    its last whole record, `failed` holds the error, `lost` counts the records not kept, and
    `on_failure(exc)` is called once (the run folder stops the replay with it).
    """

    FLUSH_S = 0.05  # ~17 us per record for its own write + flush, ~1 us batched
    FLUSH_BYTES = 1 << 20

    def __init__(self, run_dir: str | Path) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / RECORDS_FILE
        self._fh = self.path.open("ab", buffering=0)
        self._kept = self._fh.seek(0, 2)  # bytes of whole records in the file
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self.failed: OSError | None = None
        self.lost = 0
        self.on_failure: Callable[[OSError], None] | None = None

    def write(self, rec: Mapping[str, Any]) -> None:
        self.observe(rec)
        if self.failed is not None:
            self.lost += 1
            return
        line = orjson.dumps(rec, option=_DUMP_OPTIONS)
        self._pending.append(line)
        self._pending_bytes += len(line)
        if self._pending_bytes >= self.FLUSH_BYTES:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._timer = loop.call_later(self.FLUSH_S, self.flush)

    def flush(self) -> None:
        """Write every pending record (unbuffered: a write that returns is in the file)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending or self._fh.closed:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        done = 0
        try:
            while done < len(data):
                done += self._fh.write(memoryview(data)[done:]) or 0
            self._kept += done
        except OSError as exc:
            self._write_failed(exc, data, done)

    def _write_failed(self, exc: OSError, data: bytes, done: int) -> None:
        """Keep the whole records that went before the disk filled; cut any half one."""
        whole = data.rfind(b"\n", 0, done) + 1
        self._kept += whole
        self.failed, self.lost = exc, self.lost + data.count(b"\n", whole)
        with contextlib.suppress(OSError):
            os.ftruncate(self._fh.fileno(), self._kept)
        if self.on_failure is not None:
            self.on_failure(exc)

    def close(self) -> None:
        if not self._fh.closed:
            self.flush()
            with contextlib.suppress(OSError):
                self._fh.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
