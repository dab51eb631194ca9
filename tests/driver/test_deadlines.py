"""The three deadlines hold in any order: TTFT from the send to the first token, idle between
reads, total from the send over everything (docs/driver.md, "How a run ends").

No upper bound on when a deadline fired (a loaded machine's timer fires late): which deadline
ended a request is decided from its stamps, so the error's class says which one came first,
and the stream it cut says it came before the server was done."""

import pytest

from harness.driver.target import Timeouts
from tests.driver.helpers import replay, sess, trace


async def _one(make_server, tmp_path, tm: Timeouts, *, sid="s", output=40, **server):
    srv = await make_server(**server)
    _, records, _ = await replay(
        trace(sess(sid, [(8, output, 0)])), srv.url, tmp_path, target_kw={"timeouts": tm}
    )
    (r,) = records
    return r


@pytest.mark.parametrize(
    ("server", "tm", "why"),
    [
        # the first token at 0.1 s, then a stall: the total deadline (send + 1.05) comes before
        # the idle one (first token + 1.0 >= send + 1.1); counted from the first token instead
        # (as it was once) it would come after the idle one, an IdleTimeout
        (
            {"sid": "fault-stall-a", "ttft_base": 0.1, "slow_s": 30.0},
            Timeouts(ttft=60, idle=1.0, total=1.05),
            "first",
        ),
        # total < idle, tokens steady from the start: 40 tokens take 2 s, the stream is cut
        ({"token_delay": 0.05}, Timeouts(ttft=5, idle=5, total=0.5), "steady"),
        # total < TTFT: the headers came, the first token (at 3 s) does not
        ({"ttft_base": 3.0}, Timeouts(ttft=5, idle=5, total=0.5), "no token"),
    ],
    ids=["first-token-late", "steady", "no-token"],
)
@pytest.mark.slow
async def test_total_runs_from_the_send_whatever_the_other_deadlines(
    make_server, tmp_path, server, tm, why
):
    r = await _one(make_server, tmp_path, tm, **server)
    assert (r["status"], r["error"]["class"]) == ("timeout", "TotalTimeout"), (why, r["error"])
    # the deadline runs from the request's start, before the connect that t_sent (the write)
    # follows: a loaded machine's slow connect put t_done - t_sent at 0.466 of 0.5 once
    assert r["t_done"] - r["t_scheduled"] >= tm.total - 0.01, why
    assert len(r["chunk_times"]) < 40, why  # cut: the server had more to send
    if why == "no token":
        assert r["t_first_token"] is None


@pytest.mark.slow
async def test_total_below_ttft_bounds_the_wait_for_headers(make_server, tmp_path):
    tm = Timeouts(ttft=5, idle=5, total=0.5)
    r = await _one(make_server, tmp_path, tm, sid="fault-slowheaders-a", slow_s=3.0)
    assert (r["status"], r["error"]["class"]) == ("timeout", "TotalTimeout"), r["error"]
    assert r["t_first_token"] is None  # it ended before the headers came (at 3 s)
    assert r["t_done"] - r["t_scheduled"] >= 0.49


@pytest.mark.slow
async def test_ttft_below_total_is_still_a_ttft_timeout(make_server, tmp_path):
    tm = Timeouts(ttft=0.3, idle=5, total=0.6)
    r = await _one(make_server, tmp_path, tm, sid="fault-slowheaders-a", slow_s=3.0)
    assert (r["status"], r["error"]["class"]) == ("timeout", "TTFTTimeout"), r["error"]
    assert r["t_first_token"] is None  # it ended before the headers came (at 3 s)
    assert r["t_done"] - r["t_scheduled"] >= 0.29


@pytest.mark.slow
async def test_idle_below_total_after_the_first_token_is_an_idle_timeout(make_server, tmp_path):
    tm = Timeouts(ttft=5, idle=0.3, total=0.8)
    r = await _one(make_server, tmp_path, tm, sid="fault-stall-a", slow_s=3.0)
    assert (r["status"], r["error"]["class"]) == ("timeout", "IdleTimeout"), r["error"]
    assert r["t_done"] - r["t_last_token"] >= 0.29


@pytest.mark.slow
async def test_a_request_within_every_deadline_is_ok(make_server, tmp_path):
    tm = Timeouts(ttft=1, idle=1, total=2)
    r = await _one(make_server, tmp_path, tm, output=5, ttft_base=0.2, token_delay=0.05)
    assert r["status"] == "ok" and r["completion_tokens"] == 5


@pytest.mark.slow
async def test_a_first_token_later_than_idle_but_within_ttft_is_ok(make_server, tmp_path):
    """The timer is armed for the soonest deadline (idle, here): its early wake re-arms for the
    TTFT deadline, it does not end the request."""
    tm = Timeouts(ttft=2, idle=0.3, total=3)
    r = await _one(make_server, tmp_path, tm, output=5, ttft_base=0.6, token_delay=0.05)
    assert r["status"] == "ok" and r["completion_tokens"] == 5
    assert r["t_first_token"] - r["t_sent"] >= 0.55


@pytest.mark.slow
async def test_a_stall_after_a_first_token_later_than_idle_is_an_idle_timeout(
    make_server, tmp_path
):
    """The timer's early wake before the first token (at the idle time) re-arms no later than
    an idle deadline could come, not at the TTFT deadline: the stall after it is caught."""
    tm = Timeouts(ttft=5, idle=0.3, total=10)
    r = await _one(make_server, tmp_path, tm, sid="fault-stall-a", slow_s=3.0, ttft_base=0.5)
    assert (r["status"], r["error"]["class"]) == ("timeout", "IdleTimeout"), r["error"]
    assert r["t_first_token"] - r["t_sent"] >= 0.45
    assert r["t_done"] - r["t_last_token"] >= 0.29
