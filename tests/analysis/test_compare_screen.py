"""`harness compare` screens its own sides as the gate does: a run on a busy host, one that ended
badly and an outlier among a side's runs are left out with the reason listed, and a side left with
no usable run is `inconclusive`, whatever its rows show."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness.analysis.compare.verdict import Verdict, judge, judge_analyses
from harness.analysis.loader import load_runs
from harness.analysis.summary import analyze
from harness.app.cli import main

NIGHTS = Path(__file__).parent / "fixtures" / "nightly"
GATE = "tpgs:-5%"
BLAMED = {"cause": "host", "warnings": ["late sends"]}  # no wait share: the self-check decides


@pytest.fixture(scope="module")
def nights():
    runs = load_runs([str(NIGHTS / f"night{n}") for n in range(1, 5)])
    return {n: analyze(r) for n, r in zip(range(1, 5), runs, strict=True)}


def busy(a):
    return replace(a, summary={**a.summary, "client": BLAMED})


def tpgs(j):
    return next(r for r in j.rows if r.key == "tpgs")


@pytest.mark.slow
def test_a_busy_run_is_left_out_of_its_side_with_the_reason(nights):
    j = judge_analyses(
        [nights[1], nights[2]], [nights[3], busy(nights[4])], fail_on=GATE, screen_sides=True
    )
    assert j.run == ["nightly-2026-12-03"]  # the starved, busy night is not evidence
    assert ("nightly-2026-12-04", "host busy: the client self-check blamed the host") in j.left_out
    assert "run: nightly-2026-12-04 left out: host busy" in "\n".join(j.notes)
    assert tpgs(j).run == pytest.approx(nights[3].summary["tpgs"], rel=1e-6)
    unscreened = judge_analyses([nights[1], nights[2]], [nights[3], busy(nights[4])], fail_on=GATE)
    assert unscreened.run == ["nightly-2026-12-03", "nightly-2026-12-04"]  # a gate's own runs


@pytest.mark.slow
def test_a_side_with_no_usable_run_is_inconclusive_whatever_it_shows(nights):
    j = judge_analyses([nights[1], nights[2]], [busy(nights[4])], fail_on=GATE, screen_sides=True)
    assert j.verdict == Verdict.INCONCLUSIVE and j.exit_code == 4 and j.failures == []
    assert j.why_inconclusive.startswith("the run side has no usable run")
    assert all(r.verdict in (None, "inconclusive") for r in j.rows)
    shown = judge_analyses([nights[1], nights[2]], [nights[4]], fail_on=GATE, screen_sides=True)
    assert tpgs(shown).change == pytest.approx(tpgs(j).change)  # the rows still show the run


@pytest.mark.slow
def test_a_run_that_ended_badly_is_left_out_unless_allowed(nights):
    cut = replace(nights[3].run, manifest={**nights[3].run.manifest, "status": "interrupted"})
    side = [nights[2], replace(nights[3], run=cut)]
    j = judge_analyses([nights[1]], side, screen_sides=True)
    assert dict(j.left_out)["nightly-2026-12-03"].startswith("ended badly: interrupted")
    allowed = judge_analyses([nights[1]], side, screen_sides=True, allow_unclosed=True)
    assert allowed.run == ["nightly-2026-12-02", "nightly-2026-12-03"]


@pytest.mark.slow
def test_an_outlier_among_a_side_s_runs_is_left_out(tmp_path, capsys):
    starved = tmp_path / "starved-alike"  # a night that claims night 1's configuration
    shutil.copytree(NIGHTS / "night4", starved, ignore=shutil.ignore_patterns("*.html"))
    manifest = json.loads((starved / "manifest.json").read_text())
    manifest["target"] = json.loads((NIGHTS / "night1" / "manifest.json").read_text())["target"]
    manifest["run_id"] = "starved-alike"
    (starved / "manifest.json").write_text(json.dumps(manifest))
    base = [NIGHTS / f"night{n}" for n in (1, 2, 3)] + [starved]
    j = judge(base, [NIGHTS / "night2"], fail_on=GATE)
    why = dict(j.left_out)["starved-alike"]
    assert why.startswith("an outlier among the runs of its side (TPGS") and "disturbed" in why
    assert "starved-alike" not in j.baseline
    args = ["compare", *(f"--baseline={b}" for b in base), "--run", str(NIGHTS / "night2")]
    main([*args, "--fail-on", GATE])
    assert "baseline: starved-alike left out: an outlier" in capsys.readouterr().out


@pytest.mark.slow
def test_the_history_is_screened_by_the_limits_a_gate_was_given(nights):
    from harness.analysis.compare.history import screen
    from harness.analysis.host_state import Screen

    waited = replace(
        nights[2], summary={**nights[2].summary, "client": {"run_queue_wait_share": 0.95}}
    )
    assert screen([waited], [nights[1]]).kept == []  # the screen's own 0.9
    assert screen([waited], [nights[1]], host=Screen(max_wait_share=1.0)).kept == [waited]
