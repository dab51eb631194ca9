"""The preflight's probe is shaped like the run's requests (their API, sampling and the first
request's tools): a server that refuses tools (vLLM started without a tool parser) stops the run
before the clock in one line, where a plain probe passed and then every request failed."""

from __future__ import annotations

import pytest

from harness.errors import TargetError
from tests.driver.helpers import replay
from tests.trace.tiny import no_think, small_generated


@pytest.mark.slow
async def test_a_server_that_refuses_the_runs_tools_fails_the_preflight(make_server, tmp_path):
    srv = await make_server(refuse_tools=True)
    trace = no_think(small_generated(sessions=1, seed=5, content="code", turn_form="tools"))
    with pytest.raises(TargetError) as err:
        await replay(trace, srv.url, tmp_path / "t", api="chat", target_kw={"preflight": True})
    message = str(err.value)
    assert "shaped like the run's" in message and "HTTP400" in message and "\n" not in message
    assert len(srv.log) == 1 and srv.log[0]["body"]["tools"]  # the probe, with the run's tools


@pytest.mark.slow
async def test_plain_turns_pass_a_server_that_refuses_tools(make_server, tmp_path):
    srv = await make_server(refuse_tools=True)
    trace = no_think(small_generated(sessions=1, seed=5, content="code", turn_form="plain"))
    _, records, _ = await replay(
        trace, srv.url, tmp_path, api="chat", target_kw={"preflight": True}
    )
    assert {r["status"] for r in records} == {"ok"}
    assert "tools" not in srv.log[0]["body"]  # the probe: none, as none of the run's carry any
