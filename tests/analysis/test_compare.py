"""Compare: a real regression over repeats is caught, one run a side never is, noise is not,
CI output parses."""

from __future__ import annotations

import json

import pytest

from harness.analysis.compare.changes import parse_fail_on
from harness.analysis.compare.verdict import compare_runs
from harness.app.cli import main
from harness.errors import InputError
from tests.analysis.synthetic import write_synthetic_run

FAIL_ON = "ttft_p90:+10%,tpgs:-5%,cache_hit_rate:-0.02"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    runs = {
        "a": write_synthetic_run(root / "a", "a", seed=1),
        "b": write_synthetic_run(root / "b", "b", seed=2),
        "a2": write_synthetic_run(root / "a2", "a2", seed=4),
        "slow": write_synthetic_run(root / "slow", "slow", seed=3, ttft_scale=1.2),
    }
    for i in (1, 2):  # repeats: the run is the unit of evidence
        runs[f"slow{i}"] = write_synthetic_run(
            root / f"slow{i}", f"slow{i}", seed=30 + i, ttft_scale=1.2
        )
    return runs


def _slow(runs):
    return [runs["slow"], runs["slow1"], runs["slow2"]]


def _base(runs):
    return [runs["a"], runs["b"], runs["a2"]]


def _row(result, key):
    return next(r for r in result.rows if r.key == key)


@pytest.mark.slow
def test_injected_20_percent_ttft_regression_over_repeats_is_regressed(runs):
    result = compare_runs(_base(runs), _slow(runs), fail_on=FAIL_ON)
    row = _row(result, "ttft_p90")
    assert row.significant and row.direction == "worse" and row.verdict == "regressed"
    assert row.change == pytest.approx(0.2, abs=0.06) and row.interval[0] > 0
    assert row.band_source == "between 3+3 runs"
    assert result.exit_code == 1 and result.verdict == "regressed"
    assert [f.split()[0] for f in result.failures] == ["ttft_p90"]
    assert _row(result, "tpot_p90").verdict != "regressed"  # TPOT did not change


@pytest.mark.slow
def test_one_run_a_side_reports_the_change_but_never_calls_it_regressed(runs):
    result = compare_runs([runs["a"]], [runs["slow"]], fail_on=FAIL_ON)
    row = _row(result, "ttft_p90")
    assert row.change == pytest.approx(0.2, abs=0.06) and row.interval[0] > 0  # within-run
    assert row.verdict == "inconclusive" and row.band_source == "one run: within-run only"
    assert result.exit_code == 4 and result.failures == [] and result.runs_needed >= 1


@pytest.mark.slow
def test_same_distribution_is_not_regressed(runs):
    result = compare_runs([runs["a"], runs["a2"]], [runs["b"]], fail_on=FAIL_ON)
    assert result.failures == [] and result.exit_code in (0, 4)
    assert _row(result, "ttft_p90").direction == "~"


@pytest.mark.slow
def test_repeats_are_pooled_and_globs_expand(runs):
    pattern = str(runs["a"].parent / "a*")
    result = compare_runs([pattern], [runs["b"]])
    assert result.baseline == ["a", "a2"]
    assert result.counts["baseline"]["ok"] == 2 * result.counts["run"]["ok"]
    row = _row(result, "ttft_p90")
    assert row.n_baseline == 2 * row.n_run and row.units == (2, 1)


@pytest.mark.slow
def test_cli_exit_codes_and_formats(runs, capsys):
    assert main(["compare", str(runs["a"]), str(runs["b"]), "--fail-on", FAIL_ON]) == 4
    assert "INCONCLUSIVE" in capsys.readouterr().out
    sides = [a for r in _base(runs) for a in ("--baseline", str(r))]
    sides += [a for r in _slow(runs) for a in ("--run", str(r))]
    assert main(["compare", *sides, "--fail-on", FAIL_ON, "--format", "json"]) == 1
    out = capsys.readouterr()
    payload = json.loads(out.out)
    assert payload["verdict"] == "regressed" and payload["failures"]
    assert "regression: ttft_p90" in out.err
    assert (
        main(
            [
                "compare",
                "--baseline",
                str(runs["a"]),
                "--run",
                str(runs["slow"]),
                "--format",
                "markdown",
            ]
        )
        == 4
    )
    assert "| TTFT p90 (s) |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ttft_p90:10%", "expected METRIC"),
        ("latency:+10%", "unknown metric 'latency'"),
        ("tpgs", "expected"),
    ],
)
def test_bad_fail_on_specs_are_clear_errors(spec, message):
    with pytest.raises(InputError, match=message):
        parse_fail_on(spec)


def test_fail_on_parses_relative_and_absolute():
    t = parse_fail_on("ttft_p90:+10%,cache_hit_rate:-0.02")
    assert (t[0].increase, t[0].amount, t[0].relative) == (True, 0.1, True)
    assert (t[1].increase, t[1].amount, t[1].relative) == (False, 0.02, False)


@pytest.mark.slow
def test_errors_appearing_from_a_clean_baseline_fail_an_absolute_threshold(runs, tmp_path):
    from tests.analysis.golden import MANIFEST, write_run
    from tests.analysis.synthetic import synthetic_records

    records = synthetic_records(seed=2)
    for r in records[::5]:  # a fifth of the requests now time out
        r.update(status="timeout", error={"class": "TimeoutError", "message": "slow"})
    broken = write_run(tmp_path / "broken", records, {**MANIFEST, "run_id": "broken"})
    broken2 = write_run(tmp_path / "broken2", records, {**MANIFEST, "run_id": "broken2"})
    result = compare_runs([runs["a"], runs["b"]], [broken, broken2], fail_on="error_rate:+0.05")
    row = _row(result, "error_rate")
    assert row.baseline == 0 and row.run == pytest.approx(0.2) and row.verdict == "regressed"
    assert result.exit_code == 1


@pytest.mark.slow
def test_runs_of_different_traces_are_not_comparable(runs, tmp_path):
    import json

    def with_trace(name: str, source, sha: str):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "records.jsonl").write_bytes((source / "records.jsonl").read_bytes())
        manifest = json.loads((source / "manifest.json").read_text())
        (folder / "manifest.json").write_text(json.dumps({**manifest, "trace_sha256": sha}))
        return folder

    result = compare_runs(
        [with_trace("b", runs["b"], "0" * 64)],
        [with_trace("a", runs["a"], "f" * 64)],
        fail_on="ttft_p90:+1%",
    )
    assert all(r.verdict is None for r in result.rows)
    why = "different trace, baseline vs run: trace.jsonl sha256 000000000000 vs ffffffffffff"
    assert all(r.why_not == why for r in result.rows)
    assert result.exit_code == 5 and result.verdict == "not comparable"
    assert result.shared_why_not == result.why_not_comparable == why


@pytest.mark.slow
def test_an_imported_run_gets_no_verdict_on_what_its_tool_defines_otherwise(runs, tmp_path):
    import json

    imported = tmp_path / "imported"
    imported.mkdir()
    (imported / "records.jsonl").write_bytes((runs["slow"] / "records.jsonl").read_bytes())
    manifest = json.loads((runs["slow"] / "manifest.json").read_text())
    # The importer stated no trace: nothing is judged; once the trace is known, TTFT is.
    manifest["imported"] = {"tool": "aiperf", "source": "x", "notes": []}
    (imported / "manifest.json").write_text(json.dumps(manifest))
    rows = {r.key: r for r in compare_runs([runs["a"]], [imported]).rows}
    assert rows["ttft_p90"].verdict is None and rows["ttft_p90"].why_not.startswith("trace unknown")
    stated = {"trace": "t.jsonl (weka_trace)", "load": {"concurrency": 4}}
    manifest["imported"]["settings"] = stated
    (imported / "manifest.json").write_text(json.dumps(manifest))
    rows = {r.key: r for r in compare_runs([runs["a"]], [imported]).rows}  # a fixture: no hash
    assert rows["tpot_p90"].verdict is None and "aiperf" in rows["tpot_p90"].why_not
    assert rows["ttft_p90"].verdict is not None  # TTFT is defined alike: judged


@pytest.mark.slow
def test_history_spread_is_noise_a_change_inside_it_is_not_regressed(runs, tmp_path):
    quiet = [write_synthetic_run(tmp_path / f"q{i}", f"q{i}", seed=40 + i) for i in range(3)]
    wide = [
        write_synthetic_run(tmp_path / f"h{i}", f"h{i}", seed=20 + i, ttft_scale=scale)
        for i, scale in enumerate((1.0, 1.35, 0.8))
    ]
    plain = compare_runs([runs["a"]], [runs["slow"]], fail_on=FAIL_ON, history_dirs=quiet)
    banded = compare_runs([runs["a"]], [runs["slow"]], fail_on=FAIL_ON, history_dirs=wide)
    row = _row(plain, "ttft_p90")
    assert row.band_source == "history of 3 runs" and row.verdict == "regressed"
    assert plain.exit_code == 1
    row = _row(banded, "ttft_p90")
    assert row.band == pytest.approx(0.25, abs=0.12) and row.verdict != "regressed"
    assert banded.exit_code == 4
