"""The harness's own replay as a client of `harness record`: a generated AgentX-shaped trace
(tool calls, forked subagents in parallel) sent through the proxy comes back as the same session
tree, and a profile fitted to the recording draws traces with its turn count, prefix reuse and
subagent share within the fidelity table's tolerances."""

from __future__ import annotations

import asyncio

import pytest

from harness.driver.config import ReplayConfig
from harness.driver.http import HTTPTarget, HTTPTargetConfig
from harness.driver.replay_into import run_replay
from harness.record.recorder import BackgroundRecorder
from harness.trace.fit import check, fit_profile
from harness.trace.formats import load_trace
from harness.trace.generate import generate
from harness.trace.model import Session, Trace
from harness.trace.profile import load_profile
from harness.trace.stats import compute_stats
from tests.driver.helpers import TEST_TIMEOUTS
from tests.record.conftest import recording

pytestmark = pytest.mark.slow
SETS = (
    "turns.median=6",
    "subagents.turns.median=3",
    "think_s.median=0",
    "subagents.think_s.median=0",
    "subagents.probability=0.6",
)


def _tree(trace: Trace, s: Session) -> tuple:
    """A session's shape: turns, mode, fork turn, and its subagents' shapes by spawning turn."""
    kids: dict[int, list] = {}
    for k, turn in enumerate(s.turns):
        for child in turn.spawns:
            kids.setdefault(k, []).append(_tree(trace, trace.session(child)))
    return (
        len(s.turns),
        s.mode,
        s.fork_turn,
        tuple(sorted((k, tuple(sorted(v))) for k, v in kids.items())),
    )


@pytest.fixture(scope="module")
def round_trip(sim_server, tmp_path_factory):
    base = tmp_path_factory.mktemp("roundtrip")
    profile = load_profile("workloads/agentx-cpu.yaml", sets=SETS)
    sent = generate(profile, seed=3, sessions=10)
    rec = recording(
        sim_server.url, base / "rec", base / "salt", tokenizer="pieces", block_tokens=64
    )
    with BackgroundRecorder(rec) as url:
        config = HTTPTargetConfig(
            endpoints=(url,), model="agentic-harness-reference", api="chat", timeouts=TEST_TIMEOUTS
        )
        replay = ReplayConfig(api="chat", run_id="rt", concurrency=4)
        asyncio.run(run_replay(sent, HTTPTarget(config), replay, base / "run"))
    return sent, load_trace(base / "rec" / "trace.jsonl")


def test_the_recording_has_the_session_tree_that_was_sent(round_trip):
    sent, recorded = round_trip
    assert recorded.num_requests == sent.num_requests + 1  # the target's preflight request
    trees = [_tree(recorded, s) for s in recorded.main_sessions]
    trees.remove((1, None, None, ()))  # the preflight: a main session of its own (its header's)
    assert sorted(trees) == sorted(_tree(sent, s) for s in sent.main_sessions)
    assert sum(s.mode == "fork" for s in recorded.sessions) > 5  # forks in parallel, joined


def test_a_fitted_profile_draws_the_recordings_shape(round_trip):
    _, recorded = round_trip
    profile = fit_profile(recorded, name="fit", source="test")
    fitted = compute_stats(recorded)
    for seed in (1, 2, 3):
        _, rows = check(profile, fitted, sessions=100, seed=seed)
        met = {r["key"]: r["met"] for r in rows}
        assert met["turns_per_main_session"] and met["ideal_cache_hit"], rows
        assert met["main_sessions_with_subagents"], rows
