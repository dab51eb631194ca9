"""Weka / AgentX corpora as published: directories, request types, id scopes, broken files."""

import json

import pytest

from harness.errors import TraceFormatError
from harness.trace.formats import detect_format, load_trace
from harness.trace.stats import compute_stats

from .tiny import write


def _call(t, n_in, out, ids, kind="n", think=0.0):
    return {"t": t, "type": kind, "in": n_in, "out": out, "hash_ids": ids, "think_time": think}


def _trace(tid, requests, scope="local"):
    return {"id": tid, "block_size": 64, "hash_id_scope": scope, "requests": requests}


def test_a_directory_of_trace_files_is_one_trace(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write(corpus / "b.json", json.dumps(_trace("b", [_call(0, 100, 5, [1, 2])]), indent=2))
    write(
        corpus / "a.json",
        json.dumps(_trace("a", [_call(0, 70, 5, [1, 2]), _call(3, 140, 5, [1, 2, 3])])),
    )
    write(corpus / "notes.txt", "not a trace")
    assert detect_format(corpus) == "weka"
    trace = load_trace(corpus)
    assert [s.id for s in trace.sessions] == ["a", "b"]  # files by name
    assert [len(s.turns) for s in trace.sessions] == [2, 1]
    assert trace.header.meta["hash_id_scope"] == "local"


def test_streaming_calls_are_requests_and_unknown_types_are_named(tmp_path):
    doc = _trace("t", [_call(0, 100, 5, [1, 2], kind="s"), _call(1, 150, 5, [1, 2, 3], think=0.5)])
    trace = load_trace(write(tmp_path / "s.json", json.dumps(doc)))
    assert [(t.input_tokens, t.think_s) for t in trace.sessions[0].turns] == [
        (100, 0.0),
        (150, 0.5),
    ]
    doc["requests"].append({"t": 2, "type": "tool"})
    with pytest.raises(
        TraceFormatError,
        match=r"requests\[2\]\.type': unknown request type 'tool' \(one of 'n', 's', 'subagent'\)",
    ):
        load_trace(write(tmp_path / "x.json", json.dumps(doc)))


def _two_traces_same_ids(tmp_path, scope):
    lines = [json.dumps(_trace(tid, [_call(0, 128, 4, [1, 2])], scope)) for tid in ("x", "y")]
    return load_trace(write(tmp_path / f"{scope}.jsonl", "\n".join(lines) + "\n"))


def test_local_ids_are_private_to_their_trace_and_global_ids_are_shared(tmp_path):
    local = _two_traces_same_ids(tmp_path, "local")
    assert compute_stats(local, block_size=64)["ideal_cache_hit"] == 0.0
    shared = _two_traces_same_ids(tmp_path, "global")
    assert (
        compute_stats(shared, block_size=64)["ideal_cache_hit"] == 64 / 256
    )  # y hits one block of x


def test_local_scope_is_shared_within_a_trace_with_its_subagents(tmp_path):
    group = {"t": 1, "type": "subagent", "requests": [_call(1, 128, 4, [1, 2])]}
    doc = _trace("p", [_call(0, 128, 4, [1, 2]), group, _call(2, 192, 4, [1, 2, 3])])
    stats = compute_stats(load_trace(write(tmp_path / "p.json", json.dumps(doc))), block_size=64)
    assert stats["ideal_cache_hit"] == (64 + 128) / (128 + 128 + 192)


def test_bad_scope_and_bad_local_ids(tmp_path):
    with pytest.raises(
        TraceFormatError, match="field 'hash_id_scope': must be 'local' or 'global'"
    ):
        load_trace(
            write(tmp_path / "a.json", json.dumps(_trace("a", [_call(0, 1, 1, [1])], "world")))
        )
    with pytest.raises(
        TraceFormatError, match=r"requests\[0\]\.hash_ids\[0\]': local ids must be in"
    ):
        load_trace(write(tmp_path / "b.json", json.dumps(_trace("b", [_call(0, 1, 1, [-1])]))))


def test_a_truncated_pretty_printed_trace_says_where_it_was_cut(tmp_path):
    text = json.dumps(
        _trace("t", [_call(0, 100, 5, [1, 2]), _call(1, 150, 5, [1, 2, 3])]), indent=2
    )
    cut = text[: text.index('"think_time"', text.index("150"))]
    path = write(tmp_path / "cut.json", cut)
    with pytest.raises(TraceFormatError) as exc:
        load_trace(path)
    line = cut.count("\n") + 1
    assert str(exc.value).startswith(f"{path}:{line}: invalid JSON at column")
    assert "truncated" in str(exc.value) and "\n" not in str(exc.value)


# A hand-made trace whose `t` agree with its think times (the export estimates `t` from them):
# the subagents start when request 0 is sent; the parent's next request goes its think time after
# request 0, which runs beside the subagents (their last send, 0.75, is earlier).
ROUND = _trace("task", [
    _call(0.0, 200, 20, [1, 2, 3, 4]),
    {"t": 0.0, "type": "subagent", "requests": [_call(0.5, 130, 10, [1, 2, 9], think=0.5),
                                                _call(0.75, 150, 11, [1, 2, 9], think=0.25)]},
    {"t": 0.0, "type": "subagent", "requests": [_call(0.0, 100, 12, [1, 8])]},
    _call(2.5, 300, 30, [1, 2, 3, 4, 5], think=2.5),
])  # fmt: skip


def _comparable(obj):
    """The fields a round trip keeps: the trace's structure, each call's numbers and ids."""
    keep = ("t", "type", "in", "out", "hash_ids", "think_time")
    out = []
    for r in obj["requests"]:
        if r["type"] == "subagent":
            out.append(("subagent", _comparable(r)))
        else:
            out.append(tuple(float(r[k]) if k in ("t", "think_time") else r[k] for k in keep))
    return out


def test_weka_native_weka_round_trip_keeps_requests_ids_and_structure(tmp_path):
    from harness.trace.formats import save_trace

    other = {**ROUND, "id": "task-2", "hash_id_scope": "local"}  # reuses the same local ids
    src = write(tmp_path / "in.jsonl", json.dumps(ROUND) + "\n" + json.dumps(other) + "\n")
    save_trace(load_trace(src), tmp_path / "n.jsonl")
    save_trace(load_trace(tmp_path / "n.jsonl"), tmp_path / "out", "weka")
    got = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").iterdir())]
    assert [g["id"] for g in got] == ["task", "task-2"]
    assert [_comparable(g) for g in got] == [_comparable(ROUND), _comparable(other)]
    assert all(g["block_size"] == 64 and g["hash_id_scope"] == "local" for g in got)


@pytest.mark.slow
def test_generated_trace_exported_and_read_back_gives_the_same_stats(tmp_path):
    from harness.trace.formats import save_trace

    from .tiny import small_generated

    trace = small_generated(sessions=10, seed=5)
    before = compute_stats(trace, block_size=64)
    keys = ("sessions", "main_sessions", "subagent_sessions", "requests", "turns_per_main_session",
            "turns_per_subagent", "prompt_tokens", "output_tokens", "think_s", "subagents_per_main_session",
            "main_sessions_with_subagents", "subagents_per_parent")  # fmt: skip
    for scope in ("global", "local"):
        save_trace(trace, tmp_path / f"{scope}.jsonl", "weka", scope=scope)
        after = compute_stats(load_trace(tmp_path / f"{scope}.jsonl"), block_size=64)
        assert {k: after[k] for k in keys} == {k: before[k] for k in keys}
        if scope == "global":  # one namespace: the system prompts shared across traces still hit
            assert after["ideal_cache_hit"] == pytest.approx(before["ideal_cache_hit"], abs=1e-12)
        else:  # each trace's blocks are its own: only what a trace shares with itself hits
            assert after["ideal_cache_hit"] < before["ideal_cache_hit"]


def test_a_weka_file_written_here_has_the_fields_aiperf_requires(tmp_path):
    from harness.trace.formats import save_trace

    from .aiperf_weka import aiperf_problems
    from .tiny import small_generated

    trace = small_generated(sessions=6, seed=2)
    save_trace(trace, tmp_path / "w", "weka")
    docs = [json.loads(p.read_text()) for p in sorted((tmp_path / "w").iterdir())]
    assert len(docs) == len(trace.main_sessions)
    assert any(r["type"] == "subagent" for d in docs for r in d["requests"])
    assert [p for d in docs for p in aiperf_problems(d)] == []
    broken = {**docs[0], "extra": 1, "hash_id_scope": "global"}
    del broken["models"]
    assert len(aiperf_problems(broken)) == 3  # the check can fail


@pytest.mark.slow
def test_forgetting_finished_local_traces_changes_no_hit(tmp_path):
    import dataclasses

    from harness.trace.formats import save_trace

    from .tiny import small_generated

    save_trace(small_generated(sessions=8, seed=4), tmp_path / "w.jsonl", "weka")  # local scope
    local = load_trace(tmp_path / "w.jsonl")
    kept = dataclasses.replace(
        local, header=dataclasses.replace(local.header, meta={})
    )  # nothing dropped
    for cache in (None, 3000):
        a, b = compute_stats(local, cache_tokens=cache), compute_stats(kept, cache_tokens=cache)
        assert (a["ideal_cache_hit"], a.get("lru_cache_hit")) == (
            b["ideal_cache_hit"],
            b.get("lru_cache_hit"),
        )
    for name, trace in (("local", local), ("kept", kept)):
        save_trace(trace, tmp_path / f"{name}.mooncake.jsonl", "mooncake", block_size=100)
    assert (tmp_path / "local.mooncake.jsonl").read_bytes() == (
        tmp_path / "kept.mooncake.jsonl"
    ).read_bytes()


def _timed(t, api, think=None, kind="n"):
    call = {"t": t, "type": kind, "in": 64, "out": 4, "hash_ids": [1]}
    if api is not None:
        call["api_time"] = api
    if think is not None:
        call["think_time"] = think
    return call


def test_gaps_come_from_t_where_think_time_is_missing_or_counts_from_an_untimed_call(tmp_path):
    # As in the kv-cache-tester corpus: `think_time` counts from the end of the last call with an
    # `api_time`; streamed calls often have none, and a few calls no `think_time` at all.
    doc = _trace("c", [
        _timed(0.0, None, 0.0, "s"),  # first call
        _timed(8.0, None, None, "s"),  # no think_time: the gap in t (the previous api unknown)
        _timed(13.0, 2.0, 20.0, "s"),  # think from an untimed call's end would double-count: t
        _timed(25.0, 1.0, 10.0),  # previous call timed: its think_time, 25 - (13 + 2) = 10
        _timed(40.0, 1.0, None),  # no think_time: t less the previous api, 40 - 26 = 14
    ])  # fmt: skip
    turns = load_trace(write(tmp_path / "c.json", json.dumps(doc))).sessions[0].turns
    assert [t.think_s for t in turns] == [0.0, 8.0, 5.0, 10.0, 14.0]


def test_a_trace_without_api_times_keeps_its_think_times(tmp_path):
    # our own export writes no api_time: its think_times are the gaps, whatever `t` says
    doc = _trace("e", [_call(0.0, 64, 4, [1]), _call(9.0, 64, 4, [1], think=2.5)])
    turns = load_trace(write(tmp_path / "e.json", json.dumps(doc))).sessions[0].turns
    assert [t.think_s for t in turns] == [0.0, 2.5]


def test_weka_round_trip_keeps_the_gaps_of_calls_without_think_time(tmp_path):
    from harness.trace.formats import save_trace

    doc = _trace("g", [_timed(0.0, 1.0, 0.0, "s"), _timed(18.0, None, None, "s"),
                       _timed(30.0, 2.0, None, "s")])  # fmt: skip
    first = load_trace(write(tmp_path / "g.json", json.dumps(doc)))
    save_trace(first, tmp_path / "out", "weka")
    again = load_trace(tmp_path / "out")
    gaps = [t.think_s for t in again.sessions[0].turns]
    assert gaps == [t.think_s for t in first.sessions[0].turns] == [0.0, 17.0, 12.0]
