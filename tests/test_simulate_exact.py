"""Two simulations of one scenario and seed write byte-identical records.jsonl, in one process
too (the slow two-process check with different hash seeds: tests/test_simulate.py), on one
replica and on a fleet routed by longest cached prefix."""

from pathlib import Path

import pytest

from harness.app.build import build_trace
from harness.app.commands.run import SIMULATE_SETS
from harness.app.runner import replay_point
from harness.app.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("target.engine.replicas=3", "target.routing=longest_prefix", "load.concurrency=9"),
    ],
    ids=["one-replica", "fleet-longest-prefix"],
)
def test_two_simulations_write_the_same_bytes(tmp_path, sets):
    quickstart = ROOT / "scenarios" / "quickstart.yaml"
    scenario = load_scenario(quickstart, [*SIMULATE_SETS, "load.max_duration_s=4", *sets])
    runs = [
        tmp_path / side / "run" for side in ("a", "b")
    ]  # one name: the run id is in every record
    for run_dir in runs:  # the replay alone: the analysis reads the records, never writes them
        replay_point(scenario, build_trace(scenario), run_dir, show_progress=False)
    first, second = ((r / "records.jsonl").read_bytes() for r in runs)
    assert first == second and first.count(b"\n") > 50
