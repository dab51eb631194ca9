"""Compare: a real regression is caught, noise is not, repeats pool, CI output parses."""

from __future__ import annotations

import json

import pytest

from harness.analysis.compare.changes import compare_runs, parse_fail_on
from harness.cli import main
from harness.errors import InputError
from tests.analysis.synthetic import write_synthetic_run

FAIL_ON = "ttft_p90:+10%,tpgs:-5%,cache_hit_rate:-0.02"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "a": write_synthetic_run(root / "a", "a", seed=1),
        "b": write_synthetic_run(root / "b", "b", seed=2),
        "a2": write_synthetic_run(root / "a2", "a2", seed=4),
        "slow": write_synthetic_run(root / "slow", "slow", seed=3, ttft_scale=1.2),
    }


def _row(result, key):
    return next(r for r in result.rows if r.key == key)


@pytest.mark.slow
def test_injected_20_percent_ttft_regression_is_significant_and_fails(runs):
    result = compare_runs([runs["a"]], [runs["slow"]], fail_on=FAIL_ON)
    row = _row(result, "ttft_p90")
    assert row.significant and row.verdict == "worse"
    assert row.change == pytest.approx(0.2, abs=0.06)
    assert row.p_value < 1e-6
    assert result.exit_code == 1
    assert [f.split()[0] for f in result.failures] == ["ttft_p90"]
    assert _row(result, "tpot_p90").verdict == "~"  # TPOT did not change


@pytest.mark.slow
def test_same_distribution_passes(runs):
    result = compare_runs([runs["a"]], [runs["b"]], fail_on=FAIL_ON)
    assert result.failures == [] and result.exit_code == 0
    assert _row(result, "ttft_p90").verdict == "~"


@pytest.mark.slow
def test_repeats_are_pooled_and_globs_expand(runs):
    pattern = str(runs["a"].parent / "a*")
    result = compare_runs([pattern], [runs["b"]])
    assert result.baseline == ["a", "a2"]
    assert result.counts["baseline"]["ok"] == 2 * result.counts["run"]["ok"]
    assert _row(result, "ttft_p90").n_baseline == 2 * _row(result, "ttft_p90").n_run


@pytest.mark.slow
def test_cli_exit_codes_and_formats(runs, capsys):
    assert main(["compare", str(runs["a"]), str(runs["b"]), "--fail-on", FAIL_ON]) == 0
    assert "~" in capsys.readouterr().out
    assert (
        main(
            ["compare", str(runs["a"]), str(runs["slow"]), "--fail-on", FAIL_ON, "--format", "json"]
        )
        == 1
    )
    out = capsys.readouterr()
    payload = json.loads(out.out)
    assert payload["failures"] and "regression: ttft_p90" in out.err
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
        == 0
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
    result = compare_runs([runs["a"]], [broken], fail_on="error_rate:+0.05")
    row = _row(result, "error_rate")
    assert row.baseline == 0 and row.run == pytest.approx(0.2) and row.verdict == "worse"
    assert result.exit_code == 1


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
    assert all(r.verdict == "not comparable" for r in result.rows)
    assert all("different traces" in r.why_not for r in result.rows)
    assert result.exit_code == 0


def test_an_imported_run_gets_no_verdict_on_what_its_tool_defines_otherwise(runs, tmp_path):
    import json

    imported = tmp_path / "imported"
    imported.mkdir()
    (imported / "records.jsonl").write_bytes((runs["slow"] / "records.jsonl").read_bytes())
    manifest = json.loads((runs["slow"] / "manifest.json").read_text())
    manifest["imported"] = {"tool": "aiperf", "source": "x", "notes": []}
    (imported / "manifest.json").write_text(json.dumps(manifest))
    rows = {r.key: r for r in compare_runs([runs["a"]], [imported]).rows}
    assert rows["tpot_p90"].verdict == "not comparable" and "aiperf" in rows["tpot_p90"].why_not
    assert rows["ttft_p90"].verdict == "worse"  # TTFT is defined alike: judged


@pytest.mark.slow
def test_history_spread_is_noise_a_change_inside_it_is_not_marked(runs, tmp_path):
    wide = [
        write_synthetic_run(tmp_path / f"h{i}", f"h{i}", seed=20 + i, ttft_scale=scale)
        for i, scale in enumerate((1.0, 1.35))
    ]
    plain = compare_runs([runs["a"]], [runs["slow"]], fail_on=FAIL_ON)
    banded = compare_runs([runs["a"]], [runs["slow"]], fail_on=FAIL_ON, history_dirs=wide)
    assert _row(plain, "ttft_p90").verdict == "worse" and plain.exit_code == 1
    row = _row(banded, "ttft_p90")
    assert row.noise_band == pytest.approx(0.35, abs=0.1) and row.verdict == "~"
    assert banded.exit_code == 0
