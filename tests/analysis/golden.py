"""A small hand-written run whose every metric tests/analysis/test_golden.py computes by hand.

Task m1: main turn 0 spawns subagent s1, whose end the main turn 1 joins; turn 2 moves to
endpoint e2 and its server reports no cached tokens. m2 times out, m3's server reports no usage
at all, w0 is warm-up and m9 cool-down. Times are seconds on the run clock.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.schema import RECORD_FIELDS, RECORD_SCHEMA_VERSION


def rec(
    request_id,
    session_id,
    turn,
    t,
    chunks=((), ()),
    tokens=(None, None, None),
    expected=(None, None, None),
    parent=None,
    endpoint="e1",
    status="ok",
    phase="measure",
    error=None,
):
    t_sched, t_sent, t_first, t_last, t_done = t
    prompt, completion, cached = tokens
    return {
        "run_id": "golden",
        "request_id": request_id,
        "session_id": session_id,
        "parent_session_id": parent,
        "agent": "main" if parent is None else "sub",
        "turn": turn,
        "endpoint": endpoint,
        "t_scheduled": t_sched,
        "t_sent": t_sent,
        "t_first_token": t_first,
        "t_last_token": t_last,
        "t_done": t_done,
        "chunk_times": list(chunks[0]),
        "chunk_tokens": list(chunks[1]),
        "prompt_tokens_expected": expected[0],
        "output_tokens_expected": expected[1],
        "cached_tokens_ideal": expected[2],
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "status": status,
        "error": error,
        "phase": phase,
    }


GOLDEN_RECORDS = [
    rec(
        "w0-0",
        "w0",
        0,
        (0.0, 0.0, 0.3, 0.5, 0.5),
        ([0.3, 0.5], [1, 1]),
        (10, 2, 0),
        (10, 2, 0),
        phase="warmup",
    ),
    rec(
        "m1-0",
        "m1",
        0,
        (1.0, 1.0, 1.5, 2.0, 2.0),
        ([1.5, 1.7, 2.0], [1, 2, 2]),
        (100, 5, 0),
        (100, 5, 0),
    ),
    rec(
        "m2-0",
        "m2",
        0,
        (1.2, 1.2, None, None, 31.2),
        status="timeout",
        expected=(90, 4, 0),
        error={"class": "TimeoutError", "message": "no reply in 30 s"},
    ),
    rec(
        "m3-0",
        "m3",
        0,
        (1.1, 1.1, 1.9, 2.9, 3.0),
        ([1.9, 2.4, 2.9], [1, 1, 1]),
        (None, None, None),
        (80, 3, 0),
    ),
    rec(
        "s1-0",
        "s1",
        0,
        (2.0, 2.1, 2.4, 2.6, 2.6),
        ([2.4, 2.6], [1, 1]),
        (50, 2, 32),
        (50, 2, 48),
        parent="m1",
        endpoint="e2",
    ),
    rec(
        "m1-1", "m1", 1, (2.6, 2.7, 3.1, 3.4, 3.5), ([3.1, 3.4], [2, 3]), (120, 5, 96), (120, 5, 96)
    ),
    rec(
        "m1-2",
        "m1",
        2,
        (3.9, 4.0, 4.2, 4.2, 4.3),
        ([4.2], [1]),
        (130, 1, None),
        (130, 1, 112),
        endpoint="e2",
    ),
    rec(
        "m9-0",
        "m9",
        0,
        (4.4, 4.4, 4.6, 4.8, 4.8),
        ([4.6, 4.8], [1, 1]),
        (10, 2, 0),
        (10, 2, 0),
        phase="cooldown",
    ),
]

MANIFEST = {
    "schema_version": RECORD_SCHEMA_VERSION,
    "run_id": "golden",
    "harness_version": "0.1.0",
    "started_at": "2026-11-29T12:00:00Z",
    "ended_at": "2026-11-29T12:00:05Z",
    "status": "complete",
    "n_gpus": 2,
    "simulated": True,
    "endpoints": ["e1", "e2"],
}


def _session(sid, new_input, output, parent=None, spawns=None):
    """A trace session whose prompts are the records' prompt_tokens_expected (10 system tokens,
    then each turn's new input on top of the previous prompt and reply), so the trace matches."""
    line = {"id": sid, "arrival_s": 0.0, "system_tokens": 10, "system_id": "sys"}
    if parent:
        line.update(parent=parent, fork_turn=None, mode="spawn")
    line["turns"] = {
        "new_input_tokens": list(new_input),
        "output_tokens": list(output),
        "think_s": [0.0] * len(output),
    }
    if spawns:
        line["turns"]["spawns"] = spawns
    return line


GOLDEN_TRACE = [
    {
        "format": "agentic-harness-trace",
        "version": 1,
        "seed": 1,
        "profile": "golden",
        "block_size": 16,
        "meta": {},
    },
    _session("w0", [0], [2]),
    _session("m1", [90, 15, 5], [5, 5, 1], spawns={"0": ["s1"]}),
    _session("s1", [40], [2], parent="m1"),
    _session("m2", [80], [4]),
    _session("m3", [70], [3]),
    _session("m9", [0], [2]),
]


def write_run(path: Path, records=GOLDEN_RECORDS, manifest=MANIFEST, trace=None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "manifest.json").write_text(json.dumps(manifest, indent=1))
    with (path / "records.jsonl").open("w") as fh:
        for r in records:
            fh.write(json.dumps({k: r[k] for k in RECORD_FIELDS if k in r}) + "\n")
    if trace is not None:
        (path / "trace.jsonl").write_text("".join(json.dumps(line) + "\n" for line in trace))
    return path
