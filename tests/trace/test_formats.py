"""Native, Mooncake and Weka/AgentX files: round trips, imports, the Mooncake export."""

import hashlib
import json

import pytest

from harness.errors import HarnessWarning, TraceFormatError
from harness.trace.content import Content
from harness.trace.formats import detect_format, load_trace, save_trace, write_mooncake
from harness.trace.native import write_trace
from harness.trace.timeline import send_order

from .tiny import MOONCAKE, small_generated, write

WEKA = {
    "id": "task-1",
    "block_size": 64,
    "tool_tokens": 100,
    "system_tokens": 28,
    "requests": [
        {"t": 0, "type": "n", "in": 200, "out": 20, "hash_ids": [1, 2, 3, 4], "think_time": 0},
        {"t": 1, "type": "subagent", "requests": [
            {"t": 1.5, "type": "n", "in": 130, "out": 10, "hash_ids": [1, 2, 9]},
            {"t": 2.0, "type": "n", "in": 150, "out": 11, "hash_ids": [1, 2, 9], "think_time": 0.25},
        ]},
        {"t": 1, "type": "subagent", "requests": [
            {"t": 1.5, "type": "n", "in": 100, "out": 12, "hash_ids": [1, 8]},
        ]},
        {"t": 3, "type": "n", "in": 300, "out": 30, "hash_ids": [1, 2, 3, 4, 5], "think_time": 2.5},
    ],
}  # fmt: skip


def test_native_round_trip_is_exact(tmp_path):
    trace = small_generated(sessions=5)
    write_trace(trace, tmp_path / "a.jsonl")
    back = load_trace(tmp_path / "a.jsonl")
    assert back == trace
    write_trace(back, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_mooncake_import_keeps_timestamps_lengths_and_blocks(tmp_path):
    path = write(tmp_path / "m.jsonl", MOONCAKE)
    assert detect_format(path) == "mooncake"
    trace = load_trace(path)
    assert trace.header.block_size == 512
    assert [s.arrival_s for s in trace.sessions] == [0.0, 0.5, 1.0, 2.5]
    t = trace.sessions[2].turns[0]
    assert (t.input_tokens, t.output_tokens, t.hash_ids) == (1300, 7, (0, 1, 5))
    segs = Content(trace).segments(trace.sessions[2].id, 0)
    assert [(s.key, s.length) for s in segs] == [
        (("blk", 0), 512),
        (("blk", 1), 512),
        (("blk", 5), 276),
    ]


def test_mooncake_grouping_follows_prefix_chains(tmp_path):
    trace = load_trace(write(tmp_path / "m.jsonl", MOONCAKE), group_sessions=True)
    assert [len(s.turns) for s in trace.sessions] == [3, 1]
    first = trace.sessions[0]
    assert [t.input_tokens for t in first.turns] == [1200, 1300, 1700]
    assert [t.think_s for t in first.turns] == [0.0, 1.0, 1.5]  # the gap between sends
    assert first.turns[1].new_input_tokens == 1300 - 1200 - 10


def test_mooncake_to_native_to_mooncake_keeps_requests_and_sharing(tmp_path):
    src = write(tmp_path / "m.jsonl", MOONCAKE + "\n")
    for grouped in (False, True):
        trace = load_trace(src, group_sessions=grouped)
        save_trace(trace, tmp_path / "n.jsonl")
        write_mooncake(load_trace(tmp_path / "n.jsonl"), tmp_path / "out.jsonl")
        got = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert got == [json.loads(line) for line in MOONCAKE.splitlines()]


def _reference_ids(trace, block_size, salt=None):
    """Chained block hashes of the materialized token ids, renumbered in first-seen order."""
    content, seen, rows = Content(trace, salt=salt), {}, []
    for _, sid, k in send_order(trace):
        ids, chain, out = content.prompt_token_ids(sid, k), b"", []
        for i in range(0, len(ids), block_size):
            chain = hashlib.sha256(chain + repr(ids[i : i + block_size]).encode()).digest()
            out.append(seen.setdefault(chain, len(seen)))
        rows.append(out)
    return rows


@pytest.mark.parametrize("block_size,salt", [(16, None), (7, "s1")])
@pytest.mark.slow
def test_mooncake_export_ids_equal_chained_hash_of_token_ids(tmp_path, block_size, salt):
    trace = small_generated(sessions=4)
    write_mooncake(trace, tmp_path / "m.jsonl", block_size=block_size, salt=salt)
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["hash_ids"] for r in rows] == _reference_ids(trace, block_size, salt)
    order = send_order(trace)
    assert [r["timestamp"] for r in rows] == [round(t * 1000) for t, _, _ in order]
    assert [r["output_length"] for r in rows] == [
        trace.session(s).turns[k].output_tokens for _, s, k in order
    ]


def test_weka_import_builds_spawned_subagents_that_the_parent_joins(tmp_path):
    trace = load_trace(write(tmp_path / "w.json", json.dumps(WEKA, indent=1)))
    assert trace.header.block_size == 64
    assert [s.id for s in trace.sessions] == ["task-1", "task-1.a1", "task-1.a2"]
    main, a1, a2 = trace.sessions
    assert main.turns[0].spawns == ("task-1.a1", "task-1.a2")
    assert [t.think_s for t in main.turns] == [0.0, 2.5]
    assert main.turns[1].new_input_tokens == 300 - 200 - 20
    assert (main.system_tokens, main.turns[1].hash_ids) == (128, (1, 2, 3, 4, 5))
    assert (a1.parent, a1.mode, a1.fork_turn, len(a1.turns)) == ("task-1", "spawn", 0, 2)
    assert a1.turns[1].think_s == 0.25 and a2.turns[0].input_tokens == 100
    save_trace(trace, tmp_path / "n.jsonl")
    assert load_trace(tmp_path / "n.jsonl") == trace


def test_weka_jsonl_and_json_list_hold_several_traces(tmp_path):
    other = {**WEKA, "id": 7}
    lines = write(tmp_path / "w.jsonl", json.dumps(WEKA) + "\n" + json.dumps(other) + "\n")
    listed = write(tmp_path / "w.json", json.dumps([WEKA, other]))
    for path in (lines, listed):
        trace = load_trace(path)
        assert [s.id for s in trace.main_sessions] == ["task-1", "7"]
        assert len(trace.sessions) == 6


BAD = [
    ("m.jsonl", MOONCAKE.replace('"output_length": 5, ', ""), ":2: field 'output_length': missing"),
    ("m.jsonl", MOONCAKE.replace('"timestamp": 500', '"timestamp": "x"'), ":2: field 'timestamp': wrong type str"),
    ("m.jsonl", MOONCAKE.replace("[3, 4]", '[3, "a"]'), ":2: field 'hash_ids[1]': must be an integer"),
    ("m.jsonl", MOONCAKE.replace('"timestamp": 1000,', '"timestamp": 1000'), ":3: invalid JSON"),
    ("w.json", json.dumps({**WEKA, "requests": [{"t": 0, "type": "n", "out": 1, "hash_ids": []}]}), "field 'requests[0].in': missing"),
    ("w.json", json.dumps({**WEKA, "requests": WEKA["requests"][1:]}), "field 'requests[0].type': a subagent group needs a request before it"),
    ("w.json", json.dumps({**WEKA, "requests": [{"t": 0, "type": "x"}]}), "field 'requests[0].type': unknown request type 'x' (one of 'n', 's', 'subagent')"),
    # a prefix hash names its whole prefix: once per prompt, and no more blocks than tokens fill
    ("m.jsonl", MOONCAKE.replace("[0, 1, 5]", "[0, 1, 0]"), ":3: field 'hash_ids[2]': repeats hash_ids[0] (0)"),
    ("m.jsonl", MOONCAKE.replace("[3, 4]", "[3, 4, 8]"), ":2: field 'hash_ids': 3 blocks, more than input_length 700 fills in 512-token blocks (2)"),
    ("w.json", json.dumps({**WEKA, "requests": [{**WEKA["requests"][0], "hash_ids": [1, 2, 1]}]}), "field 'requests[0].hash_ids[2]': repeats hash_ids[0] (1)"),
    ("w.json", json.dumps({**WEKA, "requests": [{**WEKA["requests"][0], "in": 100}]}), "field 'requests[0].hash_ids': 4 blocks of 64 tokens, more than `in` = 100 tokens fill (2)"),
    ("w.json", json.dumps({**WEKA, "requests": [WEKA["requests"][0], {**WEKA["requests"][1], "agent_id": "a"}, {**WEKA["requests"][2], "agent_id": "a"}, WEKA["requests"][3]]}), "field 'requests[2].agent_id': duplicate agent_id 'a' (also requests[1])"),
    ("x.jsonl", '{"hello": 1}\n', ":1: unrecognized trace format"),
    ("e.jsonl", "\n", "empty file"),
]  # fmt: skip


def test_a_shrinking_weka_prompt_is_a_counted_warning_not_an_error(tmp_path):
    # Claude Code compacts its context: the public corpus has 422 such calls, so they load
    calls = [{"t": t, "type": "n", "in": n, "out": 4, "hash_ids": list(range(1, n // 64 + 1))}
             for t, n in ((0, 640), (1, 700), (2, 200), (3, 260), (4, 130))]  # fmt: skip
    path = write(tmp_path / "c.json", json.dumps({**WEKA, "requests": calls}))
    with pytest.warns(HarnessWarning) as seen:
        trace = load_trace(path)
    assert len(trace.sessions[0].turns) == 5 and len(seen) == 1
    message = str(seen[0].message)
    assert message.startswith(f"{path}: 2 calls have a shorter prompt")
    assert "first: task-1 requests[2].in: 200 < 700" in message


@pytest.mark.parametrize("name,text,message", BAD)
def test_bad_import_files_fail_with_file_line_and_field(tmp_path, name, text, message):
    path = write(tmp_path / name, text)
    with pytest.raises(TraceFormatError) as exc:
        load_trace(path)
    assert str(exc.value).startswith(str(path))
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_bad_native_files_fail_with_line_and_field(tmp_path):
    trace = small_generated(sessions=2)
    write_trace(trace, tmp_path / "t.jsonl")
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    cases = {
        "version": ([json.dumps({**header, "version": 99})] + lines[1:], ":1: field 'version': unsupported version 99"),
        "parent": (lines[:1] + [ln for ln in lines[1:] if '"parent"' in ln], "field 'parent': names unknown session"),
    }  # fmt: skip
    for name, (body, message) in cases.items():
        path = write(tmp_path / f"{name}.jsonl", "\n".join(body) + "\n")
        with pytest.raises(TraceFormatError, match=message):
            load_trace(path, "native")


def test_weka_nested_groups_and_export_to_mooncake(tmp_path):
    inner = {
        "t": 2,
        "type": "subagent",
        "requests": [{"t": 2, "type": "n", "in": 70, "out": 3, "hash_ids": [1, 7]}],
    }
    child = {
        "t": 1,
        "type": "subagent",
        "requests": [WEKA["requests"][0], inner, WEKA["requests"][3]],
    }
    doc = {**WEKA, "requests": [WEKA["requests"][0], child, WEKA["requests"][3]]}
    trace = load_trace(write(tmp_path / "w.json", json.dumps(doc)))
    assert [s.id for s in trace.sessions] == ["task-1", "task-1.a1", "task-1.a1.a1"]
    assert trace.session("task-1.a1").turns[0].spawns == ("task-1.a1.a1",)
    assert trace.session("task-1.a1.a1").parent == "task-1.a1"
    write_mooncake(trace, tmp_path / "m.jsonl", block_size=64)
    rows = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    # Block-mode prompts keep their sharing: the child's first prompt repeats the parent's.
    assert [r["input_length"] for r in rows] == [200, 200, 70, 300, 300]
    assert rows[0]["hash_ids"] == rows[1]["hash_ids"]
    assert rows[2]["hash_ids"][0] == rows[0]["hash_ids"][0]


def test_native_wrong_type_names_the_field(tmp_path):
    trace = small_generated(sessions=1)
    write_trace(trace, tmp_path / "t.jsonl")
    header, first, *rest = (tmp_path / "t.jsonl").read_text().splitlines()
    bad = json.loads(first)
    bad["turns"]["output_tokens"][0] = "many"
    path = write(tmp_path / "bad.jsonl", "\n".join([header, json.dumps(bad), *rest]) + "\n")
    with pytest.raises(TraceFormatError, match=r"bad.jsonl:2: field 'turns.output_tokens.0'"):
        load_trace(path)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block_size,salt", [(8, None), (4, None), (20, "s"), (3, "s"), (64, None)])
def test_mooncake_export_of_block_traces_equals_hashing_every_prompt_from_its_start(
    tmp_path, seed, block_size, salt
):
    from harness.trace.blocks import BlockHasher

    from .test_stats import _random_block_trace

    trace = _random_block_trace(seed)  # 8-token source blocks
    content, hasher, want = Content(trace, salt=salt), BlockHasher(block_size), []
    for _, sid, k in send_order(trace):
        segs = content.segments(sid, k)
        want.append((sum(s.length for s in segs), hasher.hash_ids(segs)))
    write_mooncake(trace, tmp_path / "m.jsonl", block_size=block_size, salt=salt)
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [(r["input_length"], r["hash_ids"]) for r in rows] == want
