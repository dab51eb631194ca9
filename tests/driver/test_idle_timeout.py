"""A stall after the first token ends as an idle timeout, at the idle deadline."""

import pytest

from harness.driver.target import Timeouts
from tests.driver.helpers import replay, sess, trace


@pytest.mark.slow
async def test_a_stall_after_the_first_token_is_an_idle_timeout_at_the_idle_deadline(
    make_server, tmp_path
):
    srv = await make_server(slow_s=5.0)  # one token, then nothing for 5 s
    tm = Timeouts(connect=2, ttft=4, idle=0.3, total=10)
    sessions = [sess("fault-stall-s", [(8, 4, 0)])]
    _, records, _ = await replay(trace(*sessions), srv.url, tmp_path, target_kw={"timeouts": tm})
    (r,) = records
    assert (r["status"], r["error"]["class"]) == ("timeout", "IdleTimeout")
    stalled = r["t_done"] - r["t_last_token"]
    assert 0.3 <= stalled < 0.8, stalled  # the idle deadline, not the TTFT one (4 s)
