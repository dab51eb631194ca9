"""Context limits against a real loopback server with a short max_model_len: the limit read from
/v1/models, each policy (send, skip, trim) on the wire and in the records, the refusal attributed,
and the analyzer's overflow count and validity verdict (docs/metrics.md, "Context limits")."""

import asyncio
import sys
from asyncio.subprocess import PIPE

import orjson
import pytest

from harness.analysis.loader import load_run
from harness.analysis.summary import analyze
from harness.app.cli import main
from harness.driver.config import ReplayConfig
from harness.driver.context_limit import ContextLimit, model_len, overflow, served_limits
from harness.driver.replay_into import run_replay
from harness.trace.native import write_trace
from tests.driver.helpers import by_id, load_manifest, load_records, sess, target, trace

# system 32, then 8 new + 8 out per turn: prompts 40, 56, 72, 88 tokens; with 8 out, 48 .. 96.
# At max_model_len 76 turns 0 and 1 fit, turn 2 fits only with 4 out, turn 3's prompt alone is too long.
LIMIT = 76
TURNS = [(8, 8, 0.0)] * 4


async def _run(server, tmp_path, policy: str, **cfg):
    tr = trace(sess("a", TURNS))
    tgt = ContextLimit(target(server.url, api="completions"), policy)
    config = ReplayConfig(run_id="ctx", api="completions", **cfg)
    await run_replay(tr, tgt, config, tmp_path)
    return by_id(load_records(tmp_path)), load_manifest(tmp_path)


@pytest.mark.slow
async def test_send_records_the_servers_refusal_as_overflow(make_server, tmp_path):
    server = await make_server(max_model_len=LIMIT)
    recs, manifest = await _run(server, tmp_path, "send")
    assert manifest["context_limit"] == {
        "policy": "send",
        "max_model_len": {server.url: LIMIT},
        "source": "/v1/models",
    }
    assert len(server.log) == 4  # all sent
    assert [recs[f"a:{k}"]["status"] for k in range(4)] == ["ok", "ok", "error", "error"]
    refused = recs["a:2"]["error"]
    assert refused["class"] == "ContextOverflow"
    assert refused["message"].startswith(
        "HTTP 400 Bad Request: This model's maximum context length is 76"
    )
    summary = analyze(load_run(tmp_path)).summary
    c = summary["context_limit"]
    assert (c["overflow"], c["predicted"], c["refused"], c["skipped"], c["requests"]) == (
        2,
        2,
        2,
        0,
        4,
    )
    assert c["invalid"] and not summary["validity"]["valid"]
    assert "2 of 4 measured requests (50.0%) overflow" in summary["validity"]["reasons"][0]


@pytest.mark.slow
async def test_skip_sends_nothing_that_would_not_fit(make_server, tmp_path):
    server = await make_server(max_model_len=LIMIT)
    recs, _ = await _run(server, tmp_path, "skip")
    assert [e["request_id"] for e in server.log] == ["a:0", "a:1"]
    for k in (2, 3):
        assert recs[f"a:{k}"]["error"]["class"] == "ContextOverflowSkipped"
        assert recs[f"a:{k}"]["t_first_token"] is None
    assert "> max_model_len 76" in recs["a:2"]["error"]["message"]
    c = analyze(load_run(tmp_path)).summary["context_limit"]
    assert (c["overflow"], c["skipped"], c["refused"]) == (2, 2, 0)


@pytest.mark.slow
async def test_trim_caps_max_tokens_and_keeps_the_prompt(make_server, tmp_path):
    server = await make_server(max_model_len=LIMIT)
    recs, _ = await _run(server, tmp_path, "trim")
    sent = {e["request_id"]: e for e in server.log}
    assert list(sent) == ["a:0", "a:1", "a:2"]  # a:3's prompt alone is past the limit
    assert sent["a:2"]["body"]["max_tokens"] == LIMIT - 72 == sent["a:2"]["body"]["min_tokens"]
    assert len(sent["a:2"]["body"]["prompt"]) == 72  # never cut
    assert recs["a:2"]["status"] == "ok" and recs["a:2"]["completion_tokens"] == 4
    assert recs["a:2"]["output_tokens_expected"] == 8  # the trace's, for the analysis
    assert recs["a:3"]["error"]["class"] == "ContextOverflowSkipped"
    c = analyze(load_run(tmp_path)).summary["context_limit"]
    assert (c["overflow"], c["trimmed"], c["skipped"]) == (2, 1, 1)


@pytest.mark.slow
async def test_a_refusal_for_length_counts_even_where_no_limit_was_listed(make_server, tmp_path):
    # the server lists another model, so the driver knows no limit; it refuses all the same
    server = await make_server(max_model_len=LIMIT, models=("other",))
    recs, manifest = await _run(server, tmp_path, "send")
    assert manifest["context_limit"]["source"] is None
    assert recs["a:3"]["error"]["class"] == "ContextOverflow"
    c = analyze(load_run(tmp_path)).summary["context_limit"]
    assert not c["checked"] and (c["overflow"], c["predicted"], c["refused"]) == (2, 0, 2)


@pytest.mark.slow
async def test_a_server_that_cuts_the_output_as_vllm_does(make_server, tmp_path):
    # vLLM 0.32: turn 2 is served with max_tokens cut to the 4 left, then its min_tokens 8 refused
    server = await make_server(max_model_len=LIMIT, overflow="cap")
    recs, _ = await _run(server, tmp_path, "send")
    refused = recs["a:2"]["error"]
    assert refused["class"] == "ContextOverflow"  # the request overflowed: its error says why
    assert "min_tokens must be less than or equal to max_tokens=4" in refused["message"]
    assert "maximum context length" in recs["a:3"]["error"]["message"]
    c = analyze(load_run(tmp_path)).summary["context_limit"]
    assert (c["overflow"], c["refused"]) == (2, 2)


@pytest.mark.slow
async def test_without_min_tokens_the_cut_reply_still_counts(make_server, tmp_path):
    server = await make_server(max_model_len=LIMIT, overflow="cap")
    tgt = ContextLimit(target(server.url, api="completions", send_min_tokens=False), "send")
    await run_replay(
        trace(sess("a", TURNS)), tgt, ReplayConfig(run_id="c", api="completions"), tmp_path
    )
    recs = by_id(load_records(tmp_path))
    assert recs["a:2"]["status"] == "ok" and recs["a:2"]["completion_tokens"] == 4
    c = analyze(load_run(tmp_path)).summary["context_limit"]
    assert (c["overflow"], c["predicted"], c["refused"]) == (2, 2, 1)


@pytest.mark.slow
async def test_within_the_limit_the_run_is_valid(make_server, tmp_path):
    server = await make_server(max_model_len=4096)
    recs, _ = await _run(server, tmp_path, "skip")
    assert all(r["status"] == "ok" for r in recs.values())
    summary = analyze(load_run(tmp_path)).summary
    assert summary["context_limit"]["overflow"] == 0 and summary["validity"]["valid"]


@pytest.mark.slow
async def test_one_overflow_in_more_than_a_hundred_leaves_the_run_valid(make_server, tmp_path):
    server = await make_server(max_model_len=400)
    # 101 requests: one session of 100 short turns that fit, one whose single turn does not
    tr = trace(sess("long", [(500, 2, 0.0)]), sess("short", [(1, 1, 0.0)] * 100, system=4))
    tgt = ContextLimit(target(server.url, api="completions"), "skip")
    await run_replay(tr, tgt, ReplayConfig(run_id="ctx", api="completions"), tmp_path)
    c = analyze(load_run(tmp_path)).summary["context_limit"]
    assert (c["overflow"], c["requests"]) == (1, 101) and not c["invalid"]


def test_the_limit_and_the_test_for_it():
    data = [{"id": "a", "max_model_len": 8192}, {"id": "b"}, "junk"]
    assert (model_len(data, "a"), model_len(data, "b"), model_len(data, "c")) == (8192, None, None)
    assert (
        model_len(None, "a") is None and model_len([{"id": "a", "max_model_len": "x"}], "a") is None
    )
    assert overflow(8000, 193, 8192) and not overflow(8000, 192, 8192)
    assert overflow(8192, 0, 8192)  # a zero-output turn still asks for one token
    assert not overflow(10**6, 10, None)
    with pytest.raises(ValueError, match="context_overflow"):
        ContextLimit(target("http://127.0.0.1:9"), "cut")


@pytest.mark.slow
async def test_replay_flag_sets_the_policy(make_server, tmp_path, capsys):
    server = await make_server(max_model_len=LIMIT)
    path = tmp_path / "trace.jsonl"
    write_trace(trace(sess("a", TURNS)), path)
    run = tmp_path / "run"
    args = ["replay", path, "--endpoint", server.url, "--model", "test-model", "--api"]
    args += ["completions", "--context-overflow", "trim", "-o", run, "--max-failures", "1"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "harness", *map(str, args), stdout=PIPE, stderr=PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert [e["request_id"] for e in server.log] == ["preflight", "a:0", "a:1", "a:2"]
    manifest = load_manifest(run)
    assert manifest["context_limit"]["policy"] == "trim"
    assert manifest["target"]["context_overflow"] == "trim"
    assert main(["analyze", str(run)]) == 0
    assert "INVALID RUN: 2 of 4 measured requests" in capsys.readouterr().out
    summary = orjson.loads((run / "summary.json").read_bytes())
    assert summary["context_limit"]["trimmed"] == 1 and not summary["validity"]["valid"]


def test_the_bundled_engine_gives_its_own_limit():
    from harness.driver.engine_target import EngineTarget
    from harness.engine.config import EngineConfig

    engine = EngineTarget(EngineConfig.from_dict({"runner": "simulated", "max_model_len": 512}))
    limited = ContextLimit(engine, "skip")
    assert served_limits(engine) == ([512], "engine config")
    assert not hasattr(limited, "encode")  # the engine encodes nothing: neither does its wrapper
    assert limited.describe()["context_overflow"] == "skip"
