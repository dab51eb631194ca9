"""Not comparable is never green: a changed load or trace makes compare, trend and JSON say `not
comparable` with exit 5, the reason naming the baseline first, then the run, and only the fields
that differ, in the scenario file's words."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.analysis.compare.trend import trend
from harness.analysis.compare.verdict import Verdict, judge
from harness.app.cli import main
from harness.exit_codes import INCONCLUSIVE, NOT_COMPARABLE

NIGHTS = Path(__file__).parent / "fixtures" / "nightly"


def changed(tmp: Path, n: int, name: str, *, load=None, workload=None, sha=None) -> Path:
    """A copy of night `n` as if it had run with `load` / `workload` fields changed: the manifest
    (what the run did) and its scenario.yaml (the words a user reads) alike."""
    out = tmp / name
    shutil.copytree(NIGHTS / f"night{n}", out, ignore=shutil.ignore_patterns("*.html", "*.parquet"))
    manifest = json.loads((out / "manifest.json").read_text())
    scenario = yaml.safe_load((out / "scenario.yaml").read_text())
    manifest["run_id"], manifest["started_at"] = name, "2026-12-09T00:00:00+00:00"
    for key, value in (load or {}).items():
        manifest["replay"][{"mode": "load"}.get(key, key)] = value
        scenario["load"][key] = value
    scenario["workload"].update(workload or {})
    if sha:
        manifest["trace_sha256"] = sha
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "scenario.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    return out


@pytest.mark.slow
def test_a_changed_load_is_not_comparable_exit_5_baseline_first(tmp_path, capsys):
    at3 = changed(tmp_path, 2, "concurrency-3", load={"concurrency": 3})
    code = main(["compare", str(NIGHTS / "night1"), str(at3), "--fail-on", "tpgs:-5%"])
    out = capsys.readouterr()
    assert code == NOT_COMPARABLE == 5
    why = "different load, baseline vs run: load.concurrency 6 vs 3"
    assert f"not comparable: {why}" in out.out  # once above the table
    last = out.out.strip().splitlines()[-1]
    assert last.startswith(f"NOT COMPARABLE (tpgs:-5%): {why};") and "arrival" not in out.out
    assert "NO CHANGE" not in out.out and f"not comparable (exit 5): {why}" in out.err
    assert main(["compare", str(NIGHTS / "night1"), str(at3), "--json"]) == 5
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "not comparable" and payload["exit_code"] == 5
    assert payload["why_not_comparable"] == why
    assert all(r["verdict"] is None for r in payload["rows"])


@pytest.mark.slow
def test_another_mode_names_each_side_s_own_fields(tmp_path):
    opened = changed(
        tmp_path, 2, "open", load={"mode": "open", "session_rate": 2.0, "arrival": "constant"}
    )
    j = judge([opened], [NIGHTS / "night1"])
    assert j.verdict == Verdict.NOT_COMPARABLE
    assert j.why_not_comparable == (
        "different load, baseline vs run: load.mode open vs closed, load.session_rate 2.0 vs "
        "unset, load.arrival constant vs unset, load.concurrency unset vs 6"
    )


@pytest.mark.slow
def test_another_trace_is_named_by_the_workload_field_that_changed(tmp_path):
    seeded = changed(tmp_path, 2, "seed-2", workload={"seed": 2}, sha="ab" * 32)
    j = judge([NIGHTS / "night1"], [seeded], fail_on="tpgs:-5%")
    assert j.exit_code == 5
    assert j.why_not_comparable == "different trace, baseline vs run: workload.seed 1 vs 2"
    unnamed = changed(tmp_path, 3, "same-settings", sha="cd" * 32)
    j = judge([NIGHTS / "night1"], [unnamed], fail_on="tpgs:-5%")
    assert j.why_not_comparable == (
        "different trace, baseline vs run: trace.jsonl sha256 4fbd57d192f7 vs cdcdcdcdcdcd"
    )


@pytest.mark.slow
def test_a_runs_of_one_side_that_differ_are_named_by_run(tmp_path):
    at3 = changed(tmp_path, 2, "concurrency-3", load={"concurrency": 3})
    j = judge([NIGHTS / "night1", at3], [NIGHTS / "night3"])
    assert j.why_not_comparable == (
        "different load, baseline nightly-2026-12-01 vs baseline concurrency-3: "
        "load.concurrency 6 vs 3"
    )


@pytest.mark.slow
def test_a_fail_on_row_one_side_does_not_measure_is_not_comparable():
    j = judge([NIGHTS / "night1"], [NIGHTS / "night2"], fail_on="spec_acceptance_rate:-0.05")
    assert j.verdict == Verdict.NOT_COMPARABLE
    assert j.why_not_comparable == "spec_acceptance_rate: measured on neither side"


@pytest.mark.slow
def test_a_trend_whose_latest_night_changed_load_exits_5(tmp_path, capsys):
    runs = [NIGHTS / f"night{n}" for n in (1, 2, 3)]
    copies = []
    for r in runs:  # the trend writes a report.html beside each run: copies
        copies.append(tmp_path / r.name)
        shutil.copytree(r, copies[-1])
    at3 = changed(tmp_path, 3, "concurrency-3", load={"concurrency": 3})
    result, _ = trend([*map(str, copies), str(at3)])
    assert result.series[1] == "series 2: load.concurrency 6 vs 3 (series 1 vs series 2)"
    assert result.points[-1].verdict == "not comparable" and result.exit_code == 5
    args = ["report", "--trend", *map(str, copies), str(at3), "-o", str(tmp_path / "t.html")]
    assert main(args) == 5
    out = capsys.readouterr().out
    assert "\n  concurrency-3: not comparable\n    starts a new series: load.concurrency" in out
    assert all(len(line) < 100 for line in out.splitlines() if not line.startswith("wrote ")), out
    assert main([*args[:-4], str(copies[2]), "-o", str(tmp_path / "u.html")]) == INCONCLUSIVE
