"""Verdicts across runs, on four recorded nights (fixtures/nightly: nights 1-3 one configuration,
night 4 a starved engine): same-config pairs are never regressed, the starved night is, a starved
night in the history does not hide it, an import of unknown trace cannot fail a gate."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.compare import noise
from harness.analysis.compare.history import screen
from harness.analysis.compare.verdict import Verdict, judge, judge_analyses
from harness.analysis.loader import load_runs
from harness.analysis.summary import analyze
from harness.app.cli import main
from harness.exit_codes import INCONCLUSIVE
from harness.importers import import_run

NIGHTS = Path(__file__).parent / "fixtures" / "nightly"
IMPORTS = Path(__file__).parent / "fixtures" / "imports"
GATE = "ttft_p90:+10%,tpgs:-5%,cache_hit_rate:-0.02"


def night(n: int) -> Path:
    return NIGHTS / f"night{n}"


@pytest.fixture(scope="module")
def nights():
    return {
        n: analyze(r)
        for n, r in zip(range(1, 5), load_runs([str(night(n)) for n in range(1, 5)]), strict=True)
    }


def _alike(tmp: Path, source: Path, like: Path, name: str, started_at: str | None = None) -> Path:
    """A copy of run `source` whose manifest says it ran `like`'s target configuration: a server
    whose configuration the harness cannot see (an endpoint) that was starved one night."""
    out = tmp / name
    shutil.copytree(source, out, ignore=shutil.ignore_patterns("report.html", "*.parquet"))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["target"] = json.loads((like / "manifest.json").read_text())["target"]
    manifest["run_id"] = name
    if started_at:
        manifest["started_at"] = started_at
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("with_history", [False, True])
def test_no_ordered_pair_of_same_config_nights_is_regressed(nights, with_history):
    for a, b in itertools.permutations((1, 2, 3), 2):
        history = [nights[6 - a - b]] if with_history else []
        for fail_on in (GATE, None):
            j = judge_analyses([nights[a]], [nights[b]], history=history, fail_on=fail_on)
            assert j.verdict != Verdict.REGRESSED, (a, b, with_history, fail_on, j.failures)
            assert all(r.verdict != "regressed" for r in j.rows)


@pytest.mark.slow
def test_the_starved_night_against_night1_with_two_nights_of_history_is_regressed(capsys):
    args = ["compare", str(night(1)), str(night(4)), "--history", str(night(2))]
    code = main([*args, "--history", str(night(3)), "--fail-on", GATE])
    out = capsys.readouterr().out
    assert code == 1
    assert "history of 2 runs" in out and "REGRESSED" in out
    j = judge([night(1)], [night(4)], history=[night(2), night(3)], fail_on=GATE)
    assert j.verdict == Verdict.REGRESSED and j.exit_code == 1
    tpgs = next(r for r in j.rows if r.key == "tpgs")
    assert (
        tpgs.verdict == "regressed"
        and tpgs.interval[1] < 0
        and tpgs.band_source == "history of 2 runs"
    )
    assert j.history == ["nightly-2026-12-02", "nightly-2026-12-03"]


@pytest.mark.slow
def test_one_run_a_side_is_never_regressed_even_for_the_starved_night(nights):
    j = judge_analyses([nights[1]], [nights[4]], fail_on=GATE)
    assert j.verdict == Verdict.INCONCLUSIVE and j.exit_code == INCONCLUSIVE == 4
    ttft = next(r for r in j.rows if r.key == "ttft_p90")
    assert ttft.change > 1 and ttft.band_source == "one run: within-run only"
    assert ttft.verdict == "inconclusive" and ttft.heading == "regressed"
    assert j.runs_needed is not None and j.runs_needed >= 1
    assert any("cannot be called significant across runs" in n for n in j.notes)


@pytest.mark.slow
def test_a_starved_night_in_history_does_not_hide_a_new_starved_night(nights, tmp_path):
    earlier = _alike(tmp_path, night(4), night(1), "starved-earlier")
    j = judge([night(1)], [night(4)], history=[night(2), night(3), earlier], fail_on=GATE)
    assert j.verdict == Verdict.REGRESSED
    left = dict(j.left_out)
    assert "outlier" in left["starved-earlier"] and "TPGS" in left["starved-earlier"]
    assert any(n.startswith("history: starved-earlier left out: an outlier") for n in j.notes)


@pytest.mark.slow
def test_history_of_another_configuration_is_left_out_with_its_reason(nights):
    s = screen([nights[2], nights[4]], [nights[1]])
    assert [a.run.name for a in s.kept] == ["nightly-2026-12-02"]
    assert s.left_out == [
        (
            "nightly-2026-12-04",
            "another target configuration, baseline vs this run: "
            "target.engine.options.max_num_batched_tokens 2048 vs 32",
        )
    ]


@pytest.mark.slow
def test_history_that_ended_badly_or_blamed_the_host_is_left_out(nights, tmp_path):
    from dataclasses import replace

    cut = replace(nights[2].run, manifest={**nights[2].run.manifest, "status": "interrupted"})
    client = {"cause": "host", "warnings": ["late sends"]}
    busy = replace(nights[3], summary={**nights[3].summary, "client": client})
    s = screen([replace(nights[2], run=cut), busy], [nights[1]])
    assert s.kept == []
    reasons = dict(s.left_out)
    assert reasons["nightly-2026-12-02"].startswith("ended badly: interrupted")
    assert reasons["nightly-2026-12-03"] == "host busy: the client self-check blamed the host"


@pytest.mark.slow
def test_an_aiperf_import_against_a_native_run_exits_5_not_comparable(tmp_path, capsys):
    imported = import_run("aiperf", IMPORTS / "aiperf", tmp_path / "aiperf")
    assert main(["compare", str(night(1)), str(imported), "--fail-on", "ttft_p90:+10%"]) == 5
    out = capsys.readouterr().out
    assert "not comparable: trace unknown" in out and "NOT COMPARABLE" in out
    assert out.count("trace unknown") == 2  # above the table and in the verdict, not every row
    weka = import_run("aiperf", IMPORTS / "aiperf-weka", tmp_path / "weka")
    settings = json.loads((weka / "manifest.json").read_text())["imported"]["settings"]
    assert settings["trace"].endswith("weka (weka_trace)") and settings["load"]["concurrency"] == 3
    j = judge([night(1)], [weka], fail_on="ttft_p90:+10%")
    assert j.exit_code == 5 and j.shared_why_not.startswith("trace unknown")


@pytest.mark.slow
def test_json_carries_the_verdict_overall_and_per_row_and_exit_4(capsys):
    code = main(["compare", str(night(3)), str(night(2)), "--format", "json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 4 and payload["verdict"] == "inconclusive" and payload["exit_code"] == 4
    assert payload["runs_needed"] >= 1
    words = {"regressed", "no change detected", "inconclusive"}
    assert all(r["verdict"] in words for r in payload["rows"])
    assert main(["compare", str(night(3)), str(night(2)), "--json"]) == 4
    assert json.loads(capsys.readouterr().out)["verdict"] == "inconclusive"


@pytest.mark.slow
def test_the_same_run_on_both_sides_is_said_in_a_line(nights):
    j = judge_analyses([nights[1]], [nights[1]])
    assert any(n.startswith("the same run on both sides") for n in j.notes)
    assert j.verdict != Verdict.REGRESSED


def test_runs_are_the_unit_the_within_run_bootstrap_only_widens():
    base, cand = np.log([1.0, 1.3, 0.8]), np.log([1.1, 1.4, 0.9])
    tight = noise.spread(base, cand, np.array([]), ([1e-6] * 3, [1e-6] * 3), 0.05)
    assert tight.band.source == "between 3+3 runs" and tight.band.df == 4
    sd = np.sqrt((np.var(base, ddof=1) + np.var(cand, ddof=1)) / 2)
    assert tight.band.sd == pytest.approx(sd)
    assert tight.half_width == pytest.approx(2.776 * sd * np.sqrt(2 / 3), rel=1e-3)
    wide = noise.spread(base, cand, np.array([]), ([1.0] * 3, [1.0] * 3), 0.05)
    assert wide.half_width == pytest.approx(1.96 * np.sqrt(2 / 3), rel=1e-3)
    assert wide.half_width > tight.half_width
    one = noise.spread(base[:1], cand[:1], np.array([]), ([0.01], [0.01]), 0.05)
    assert one.half_width is None and one.band.source == "one run: within-run only"
    history = noise.spread(base[:1], cand[:1], np.log([1.2, 0.9, 1.05]), ([0.0], [0.0]), 0.05)
    assert history.band.source == "history of 3 runs" and history.band.df == 3


def test_more_runs_narrow_the_interval_and_runs_needed_says_how_many():
    base, cand = np.log([1.0, 1.1]), np.log([1.25, 1.35])
    s = noise.spread(base, cand, np.array([]), ([0.0] * 2, [0.0] * 2), 0.05)
    more = noise.runs_needed(s, s.change, 0.05)
    assert more is not None and more >= 1
    b = np.log([1.0, 1.1] * (1 + more))[: 2 + more]
    c = np.log([1.25, 1.35] * (1 + more))[: 2 + more]
    assert (
        noise.spread(b, c, np.array([]), ([0.0] * b.size, [0.0] * c.size), 0.05).half_width
        < s.half_width
    )
