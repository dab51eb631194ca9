"""The summary's readers are checked by mypy against `harness.analysis.summary_types`: a
misspelled key is a type error where it is read (run here through mypy's API on a small reader)."""

from __future__ import annotations

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

TYPES = Path(__file__).resolve().parents[2] / "harness" / "analysis" / "summary_types.py"

READER = """
from harness.analysis.summary_types import Summary


def headline(s: Summary) -> object:
    return s["ttft_s"]["p90"], s["cache"].get("miss_tokens"), s["{key}"]
"""


def _mypy(tmp_path: Path, key: str) -> tuple[str, int]:
    reader = tmp_path / "reader.py"
    reader.write_text(READER.replace("{key}", key))
    out, _, status = api.run(
        [
            "--follow-imports=skip",  # the types' own imports (pandas, the run) are not the point
            "--no-incremental",
            "--ignore-missing-imports",
            "--config-file=",
            str(TYPES),
            str(reader),
        ]
    )
    return out, status


def test_mypy_catches_a_misspelled_summary_key(tmp_path):
    out, status = _mypy(tmp_path, "cahce_hit_rate")
    assert status == 1, out
    assert 'TypedDict "Summary" has no key "cahce_hit_rate"' in out


def test_a_reader_of_real_keys_passes(tmp_path):
    out, status = _mypy(tmp_path, "cache_hit_rate")
    assert status == 0, out


def test_every_key_the_analyzer_writes_is_declared(tmp_path):
    from harness.analysis.loader import load_run
    from harness.analysis.summary import analyze
    from harness.analysis.summary_types import CacheSummary, Summary
    from tests.analysis.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path / "run", "run", n_tasks=12, seed=1)
    summary = analyze(load_run(run)).summary
    assert set(summary) == Summary.__required_keys__ | Summary.__optional_keys__
    assert set(summary["cache"]) <= CacheSummary.__required_keys__ | CacheSummary.__optional_keys__
