"""`think_cap_s`: long pauses (human breaks run to an hour) wait only the cap, and the run says so."""

import pytest

from harness.analysis.loader import load_run
from tests.driver.helpers import replay, sess, trace


@pytest.mark.slow
async def test_long_think_times_wait_only_the_cap_and_the_run_says_so(server, tmp_path):
    tr = trace(sess("a", [(8, 4, 0.0), (8, 4, 3600.0), (8, 4, 0.02)]))
    _, records, manifest = await replay(tr, server.url, tmp_path, think_cap_s=0.05)
    assert [r["status"] for r in records] == ["ok"] * 3
    for prev, cur, think in zip(records[:-1], records[1:], (0.05, 0.02), strict=True):
        assert cur["t_scheduled"] == pytest.approx(prev["t_done"] + think, abs=2e-6)
    assert manifest["think_capped"] == {"cap_s": 0.05, "pauses": 1, "seconds_cut": 3599.95}
    assert any(
        "think time capped at 0.05 s: 1 pauses shortened" in w for w in load_run(tmp_path).warnings
    )


@pytest.mark.slow
async def test_no_cap_no_entry(server, tmp_path):
    _, _, manifest = await replay(trace(sess("a", [(8, 4, 0.0)])), server.url, tmp_path)
    assert "think_capped" not in manifest
