"""The official openai and anthropic SDKs drive scripted agents through `harness record` to
`harness serve --runner simulated`: the recording holds every request, the session tree the
agents made, their token counts, nothing of their text or key; it replays with the same prompt
lengths and gives its prefix reuse as the ideal."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.trace.formats import load_trace
from tests.record.agents import MARKER, OUT, responses_task
from tests.record.conftest import API_KEY, record_tasks
from tests.waits import HANG_S

pytestmark = pytest.mark.slow


def _lines(folder: Path, kind: str) -> list[dict]:
    lines = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]
    return [x for x in lines if x["kind"] == kind]


def test_every_request_is_in_the_trace(recorded):
    trace = load_trace(recorded.folder / "trace.jsonl")
    sent = sum(len(s) for _, s in recorded.sent)
    assert trace.num_requests == sent == 13
    summary = json.loads((recorded.folder / "recording.json").read_text())
    assert summary["requests"]["in_trace"] == summary["requests"]["ok"] == sent
    assert summary["apis"] == {"chat": 8, "messages": 3, "responses": 2}
    assert summary["complete"] is True


def test_the_session_tree_is_the_agents(recorded):
    trace = load_trace(recorded.folder / "trace.jsonl")
    shape = {
        s.id: (len(s.turns), s.parent, s.mode, s.fork_turn, [list(t.spawns) for t in s.turns])
        for s in trace.sessions
    }
    assert shape == {
        "r0001": (4, None, None, None, [[], ["r0001.a1", "r0001.a2"], [], []]),
        "r0001.a1": (2, "r0001", "spawn", None, [[], []]),
        "r0001.a2": (2, "r0001", "fork", 1, [[], []]),
        "r0002": (3, None, None, None, [[], [], []]),
        "r0003": (2, None, None, None, [[], []]),
    }


def test_token_counts_are_what_was_sent(recorded):
    """Output: what each request asked for; prompt: the server's own count of what the client
    sent is recorded for every request, and the trace's prompt holds every message sent."""
    trace = load_trace(recorded.folder / "trace.jsonl")
    assert {t.output_tokens for s in trace.sessions for t in s.turns} == {OUT}
    done = _lines(recorded.folder, "done")
    counted = [d for d in done if d.get("output_counted")]
    assert len(counted) == 1 and counted[0]["output_tokens"] == OUT  # its usage was not asked
    assert sum(d["tokens"]["prompt_tokens"] is None for d in done) == 1
    main = trace.session("r0001")
    assert [len(t.prompt.messages) for t in main.turns] == [2, 4, 7, 9]
    assert [len(t.prompt.tools) for t in main.turns] == [3, 3, 3, 3]


def test_no_text_and_no_key_is_written(recorded):
    for path in recorded.folder.rglob("*"):
        data = path.read_bytes()
        assert MARKER.encode() not in data, path
        assert API_KEY.encode() not in data, path
        assert b"Fix the failing test" not in data, path


def test_kept_content_is_written_and_says_so(sim_server, tmp_path):
    """The positive control of the grep above: with --keep-content the text is there."""
    rec = record_tasks(
        sim_server.url, tmp_path / "rec", tmp_path / "salt", [responses_task], keep_content=True
    )
    assert MARKER.encode() in (rec.folder / "trace.jsonl").read_bytes()
    assert API_KEY.encode() not in (rec.folder / "trace.jsonl").read_bytes()
    summary = json.loads((rec.folder / "recording.json").read_text())
    assert summary["kept"]["content"] is True


def _replay(trace: Path, url: str, out: Path) -> list[dict]:
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "replay",
        str(trace),
        "-o",
        str(out),
        "--endpoint",
        url,
        "--api",
        "chat",
        "--model",
        "agentic-harness-reference",
        "--concurrency",
        "1",
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def replayed(recorded, sim_server, tmp_path_factory) -> tuple[Path, list[dict]]:
    """One replay of the recording, read by the tests below (nothing of it is changed)."""
    out = tmp_path_factory.mktemp("replayed") / "run"
    return out, _replay(recorded.folder / "trace.jsonl", sim_server.url, out)


def test_the_replay_sends_the_recorded_prompt_lengths(recorded, replayed):
    """The server counts each replayed prompt as it counted the recorded one: same structure,
    same roles and calls, every text of the same length in its tokenizer."""
    records = replayed[1]
    assert len(records) == 13 and {r["status"] for r in records} == {"ok"}
    turns = json.loads((recorded.folder / "recording.json").read_text())["turns"]
    done = {x["id"]: x["tokens"]["prompt_tokens"] for x in _lines(recorded.folder, "done")}
    want = {(sid, k): done[rid] for sid, ids in turns.items() for k, rid in enumerate(ids)}
    got = {(r["session_id"], r["turn"]): r["prompt_tokens"] for r in records}
    assert [key for key, n in want.items() if n is None] == [("r0001", 3)]  # no usage asked
    assert {k: n for k, n in got.items() if want[k] is not None} == {
        k: n for k, n in want.items() if n is not None
    }


def test_the_replay_ideal_is_the_recorded_reuse(recorded, replayed, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(replayed[0], run)  # analyze writes its summary into the folder
    subprocess.run(
        [sys.executable, "-m", "harness", "analyze", str(run)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    ideal = json.loads((run / "summary.json").read_text())["cache"]
    reuse = json.loads((recorded.folder / "recording.json").read_text())["prefix_reuse"]
    assert abs(ideal["ideal_cache_hit_rate"] - reuse["block_16"]) <= 0.005, (ideal, reuse)


def test_harness_run_replays_it_on_the_engine(recorded, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"name: recorded\nworkload:\n  trace: {recorded.folder / 'trace.jsonl'}\n"
        "target:\n  kind: engine\n  engine:\n    mode: inprocess\n"
        "    options: {runner: simulated, max_model_len: 16384}\n  api: chat\n"
        "load:\n  mode: closed\n  concurrency: 2\n"
    )
    out = tmp_path / "run"
    subprocess.run(
        [sys.executable, "-m", "harness", "run", str(scenario), "-o", str(out), "--quiet"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 13 and {r["status"] for r in records} == {"ok"}


def test_trace_stats_reads_it_as_any_trace(recorded):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "trace",
            "stats",
            str(recorded.folder / "trace.jsonl"),
            "--json",
        ],
        check=True,
        capture_output=True,
        timeout=HANG_S,
        text=True,
    ).stdout
    stats = json.loads(out)
    assert stats["requests"] == 13 and stats["main_sessions"] == 3
    assert stats["subagent_sessions"] == 2 and stats["main_sessions_with_subagents"] == 1 / 3
    assert [row["key"] for row in stats["fidelity"]][0] == "turns_per_main_session"
    reuse = json.loads((recorded.folder / "recording.json").read_text())["prefix_reuse"]
    assert stats["ideal_cache_hit"] == pytest.approx(reuse["block_16"], abs=0.005)
