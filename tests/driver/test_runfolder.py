"""RunFolder, the one writer of a run folder: manifest, records, /metrics snapshots, the status."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from harness.driver.runfolder import RunFolder
from harness.errors import RunFolderError
from harness.schema import MANIFEST_REQUIRED, RunStatus, new_record
from tests.driver.helpers import load_manifest, load_records


def test_open_write_close(tmp_path):
    folder = RunFolder(tmp_path / "run", "r1", n_gpus=2)
    m = load_manifest(tmp_path / "run")
    assert m["status"] == "running" and m["n_gpus"] == 2 and set(MANIFEST_REQUIRED) <= set(m)
    folder.write(new_record(request_id="a:0", session_id="a", status="ok"))
    folder.add_server_metrics("before", [{"prefix_cache_hits": 0}, None])
    folder.add_server_metrics("after", [{"prefix_cache_hits": 5}, None])
    folder.close(RunStatus.PARTIAL, workers_lost=1)
    m = load_manifest(tmp_path / "run")
    assert m["status"] == "partial" and m["ended_at"] and m["workers_lost"] == 1
    assert m["server_metrics"] == {
        "before": [{"prefix_cache_hits": 0}, None],
        "after": [{"prefix_cache_hits": 5}, None],
    }
    assert [r["request_id"] for r in load_records(tmp_path / "run")] == ["a:0"]


def test_a_folder_with_records_is_refused_and_left_alone(tmp_path):
    with RunFolder(tmp_path, "first") as folder:
        folder.write(new_record(request_id="a:0", session_id="a", status="ok"))
        folder.close("complete")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RunFolderError, match="already holds records"):
        RunFolder(tmp_path, "second")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_only_schema_statuses(tmp_path):
    folder = RunFolder(tmp_path, "r")
    with pytest.raises(ValueError):
        folder.close("done")
    assert {s.value for s in RunStatus} == {
        "running",
        "complete",
        "partial",
        "interrupted",
        "failed",
    }


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (RuntimeError, "failed"),
        (KeyboardInterrupt, "interrupted"),
        (asyncio.CancelledError, "interrupted"),
    ],
)
def test_an_exception_closes_the_run(tmp_path, error, status):
    with pytest.raises(error), RunFolder(tmp_path, "r"):
        raise error()
    assert load_manifest(tmp_path)["status"] == status


async def test_signals_interrupt_then_give_up(tmp_path):
    class Replay:
        interrupted = False
        running = True  # sending: the signal interrupts it
        phase = "run"

        def interrupt(self) -> None:
            self.interrupted = True

    replay = Replay()
    with RunFolder(tmp_path, "r") as folder, folder.signals(replay):
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.05)
        assert replay.interrupted
        folder.close(RunStatus.INTERRUPTED)
    m = load_manifest(tmp_path)
    assert (m["status"], m["signal"], m["stopped_in"]) == ("interrupted", "SIGTERM", "run")
    # handlers are removed on the way out: SIGTERM is the default again
    assert signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)


async def test_a_signal_before_the_replay_sends_cancels_the_wait(tmp_path):
    class Replay:
        interrupted = False
        running = False  # the preflight: nothing sent yet
        phase = "preflight"

        def interrupt(self) -> None:
            self.interrupted = True

    replay = Replay()
    folder = RunFolder(tmp_path, "r")
    with pytest.raises(KeyboardInterrupt, match="SIGINT"), folder, folder.signals(replay):
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)  # a probe that never answers
    assert not replay.interrupted
    m = load_manifest(tmp_path)
    assert (m["status"], m["stopped_by"], m["signal"]) == ("interrupted", "signal", "SIGINT")
    assert m["stopped_in"] == "preflight"


async def test_records_are_batched_then_flushed_within_flush_s(tmp_path):
    folder = RunFolder(tmp_path, "r")
    for i in range(3):
        folder.write(new_record(request_id=f"a:{i}", session_id="a", status="ok"))
    path = tmp_path / "records.jsonl"
    assert path.read_bytes() == b""  # pending: one write and flush for the batch
    await asyncio.sleep(folder.recorder.FLUSH_S * 4)
    assert [r["request_id"] for r in load_records(tmp_path)] == ["a:0", "a:1", "a:2"]
    folder.write(new_record(request_id="a:3", session_id="a", status="ok"))
    folder.close("complete")  # closing flushes what is pending, whatever the timer
    assert len(load_records(tmp_path)) == 4


@pytest.mark.parametrize("error", [KeyboardInterrupt, asyncio.CancelledError, RuntimeError])
async def test_pending_records_reach_the_file_on_any_way_out(tmp_path, error):
    with pytest.raises(error), RunFolder(tmp_path, "r") as folder:
        for i in range(5):
            folder.write(new_record(request_id=f"a:{i}", session_id="a", status="cancelled"))
        raise error()
    assert [r["request_id"] for r in load_records(tmp_path)] == [f"a:{i}" for i in range(5)]
