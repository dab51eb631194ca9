"""`t_sent` is stamped after the request's body is encoded: the client's CPU work is not TTFT;
the fast encoding of token-id bodies gives the same JSON."""

import dataclasses
import time

import orjson
import pytest

from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.replay_into import run_replay
from harness.driver.target import RequestSpec
from harness.trace.content import Content
from harness.trace.requests import RequestSource
from tests.driver.helpers import TEST_TIMEOUTS, load_manifest, load_records, sess, trace

ENCODE_S = 0.05  # a body that takes 50 ms to encode (a 142k-token body takes ~1 ms)


class SlowEncodingTarget(HTTPTarget):
    """Encodes slowly and notes when each request's encoding ended (perf_counter)."""

    encoded_at: dict[str, float]

    def encode(self, req):
        time.sleep(ENCODE_S)
        data = super().encode(req)
        self.encoded_at[req.request_id] = time.perf_counter()
        return data


@pytest.mark.slow
async def test_body_is_encoded_before_t_sent(server, tmp_path):
    tr = trace(sess("a", [(8, 4, 0.0), (8, 4, 0.0)]), sess("b", [(8, 4, 0.0)]))
    tgt = SlowEncodingTarget(
        HTTPTargetConfig(
            endpoints=(server.url,), model="m", api="completions", timeouts=TEST_TIMEOUTS
        )
    )
    tgt.encoded_at = {}
    # one session at a time: another request's (blocking) encoding cannot delay this one's send
    cfg = ReplayConfig(concurrency=1, api="completions", prompt_format="tokens", run_id="t")
    await run_replay(tr, tgt, cfg, tmp_path)
    t0 = load_manifest(tmp_path)["t0_perf_counter"]
    records = load_records(tmp_path)
    served = {e["request_id"]: e for e in server.log}
    assert len(records) == 3 and all(r["status"] == "ok" for r in records)
    for r in records:
        e = served[r["request_id"]]
        # one clock, in order: encoded, then sent (t_sent), then received by the server, which
        # then wrote the first token the client read: the encoding is before t_sent, not in TTFT
        sent = t0 + r["t_sent"]
        assert tgt.encoded_at[r["request_id"]] - 1e-6 <= sent <= e["t_recv"]
        assert e["t_first_token"] <= t0 + r["t_first_token"]


@pytest.mark.parametrize("extra", [{}, {"session_id_field": "session", "send_min_tokens": False}])
def test_spliced_token_id_body_is_the_encoded_body(extra):
    """The target splices token ids already in JSON into the body: the same JSON object."""
    tr = trace(sess("a", [(40, 4, 0.0), (30, 4, 0.0)]))
    source = RequestSource(tr, api="completions", prompt_format="tokens", salt="x")
    tgt = HTTPTarget(HTTPTargetConfig(endpoints=("http://h",), model="m", **extra))
    for k in range(2):
        p = source.prompt("a", k)
        spec = RequestSpec(
            request_id=f"a:{k}",
            session_id="a",
            sticky_key="a",
            endpoint=0,
            max_tokens=4,
            prompt_tokens=p.n_tokens,
            prompt=p.body,
            prompt_json=p.ids_json,
        )
        spliced = orjson.loads(b"".join(tgt.encode(spec)))
        spec = dataclasses.replace(spec, prompt_json=None)
        assert spliced == orjson.loads(b"".join(tgt.encode(spec))) == tgt.body(spec)
        assert spliced["prompt"] == Content(tr, salt="x").prompt_token_ids("a", k)


@pytest.mark.slow
async def test_wait_for_a_pooled_connection_is_send_lag_not_ttft(make_server, tmp_path):
    """Two sessions share one connection: the second request waits ~0.2 s for it. `t_sent` is when
    its bytes went (the target's `Sent`), so the wait shows as send lag, and both TTFTs match the
    server's own."""
    server = await make_server(token_delay=0.02)
    tr = trace(sess("a", [(8, 10, 0.0)]), sess("b", [(8, 10, 0.0)]))
    tgt = HTTPTarget(
        HTTPTargetConfig(
            endpoints=(server.url,),
            model="m",
            api="completions",
            timeouts=TEST_TIMEOUTS,
            max_connections=1,
        )
    )
    cfg = ReplayConfig(concurrency=2, api="completions", prompt_format="tokens", run_id="t")
    await run_replay(tr, tgt, cfg, tmp_path)
    t0 = load_manifest(tmp_path)["t0_perf_counter"]
    first, second = sorted(load_records(tmp_path), key=lambda r: r["t_sent"])
    served = {e["request_id"]: e for e in server.log}
    assert first["status"] == second["status"] == "ok"
    assert second["t_sent"] >= first["t_done"] - 0.01  # it went once the connection was free
    assert second["t_sent"] - second["t_scheduled"] > 0.15  # the wait is the client's lateness
    # t_sent is after the wait: one clock, in order, the first's end, the second's send, the
    # server's receipt of it, its first token written, then read (TTFT holds no wait)
    e1, e2 = served[first["request_id"]], served[second["request_id"]]
    assert t0 + first["t_sent"] <= e1["t_recv"]
    assert e1["t_first_token"] <= t0 + first["t_first_token"]
    assert t0 + first["t_done"] - 0.01 <= t0 + second["t_sent"] <= e2["t_recv"]
    assert e2["t_first_token"] <= t0 + second["t_first_token"]
