"""A real run shared by the export tests: the quickstart, small, on simulated time."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
SMALL = ("workload.sessions=4", "load.concurrency=4", "load.max_requests=60")


@pytest.fixture(scope="session")
def simulated_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "run"
    sets = [a for s in SMALL for a in ("--set", s)]
    assert main(["simulate", str(QUICKSTART), "-o", str(out), "--quiet", *sets]) == 0
    return out
