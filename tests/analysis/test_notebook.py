"""dashboards/compare.ipynb executes cleanly (nbclient) on the fixture runs or $HARNESS_COMPARE_RUNS."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.analysis.fixtures.make import make
from tests.waits import HANG_S

pytestmark = pytest.mark.slow  # seconds to a minute each on 2 cores: `tox -e fast` skips it

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "dashboards" / "compare.ipynb"


FIXTURES = ROOT / "tests" / "analysis" / "fixtures"


def test_compare_notebook_executes_and_reproduces_the_comparison(monkeypatch):
    """Its own runs when $HARNESS_COMPARE_RUNS is unset; the variable's forms are below."""
    monkeypatch.delenv("HARNESS_COMPARE_RUNS", raising=False)
    nb = _executed(NOTEBOOK)
    text = _text(nb)
    assert "baseline -> candidate" in text and "TTFT p90 (s)" in text
    assert _images(nb) >= 3


def test_compare_notebook_resolves_relative_run_paths(monkeypatch, tmp_path):
    """The form the notebook's own example gives: paths relative to the repo root, while the
    kernel runs in dashboards/; and paths relative to where jupyter was started ($PWD)."""
    relative = os.pathsep.join(
        ("tests/analysis/fixtures/golden", "tests/analysis/fixtures/baseline")
    )
    monkeypatch.setenv("HARNESS_COMPARE_RUNS", relative)
    monkeypatch.setenv("PWD", str(tmp_path))  # not the repo: only the repo root resolves them
    nb = _executed(NOTEBOOK)
    text = _text(nb)
    assert "golden -> baseline" in text and "TTFT p90 (s)" in text
    assert _images(nb) >= 3
    for name in ("baseline", "candidate"):
        shutil.copytree(FIXTURES / name, tmp_path / "here" / name)
    monkeypatch.setenv("HARNESS_COMPARE_RUNS", os.pathsep.join(("baseline", "candidate")))
    monkeypatch.setenv("PWD", str(tmp_path / "here"))
    assert "baseline -> candidate" in _execute(NOTEBOOK)


def test_committed_fixtures_are_what_the_generator_writes(tmp_path):
    for made in make(tmp_path):
        committed = ROOT / "tests" / "analysis" / "fixtures" / made.name
        for f in made.iterdir():
            assert (committed / f.name).read_bytes() == f.read_bytes(), (
                f"regenerate: {committed / f.name}"
            )


TREND = ROOT / "dashboards" / "trend.ipynb"


def _executed(path: Path):
    """The notebook after nbclient ran it, every cell without an error."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=HANG_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    errors = [o for o in _outputs(nb) if o.output_type == "error"]
    assert errors == []
    return nb


def _outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def _text(nb) -> str:
    return "\n".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in _outputs(nb)
    )


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for o in _outputs(nb))


def _execute(path: Path) -> str:
    """The text it printed; it drew at least one figure."""
    nb = _executed(path)
    assert _images(nb)
    return _text(nb)


def test_trend_notebook_marks_the_injected_regression(monkeypatch, tmp_path):
    """Also the glob's relative form: relative to where jupyter started ($PWD); the absolute
    form is the changed-load test's."""
    from tests.analysis.test_trend import SLOW_NIGHT, _nightly

    for night in range(1, 6):
        _nightly(tmp_path, night)
    monkeypatch.setenv("HARNESS_TREND_RUNS", "nightly-*")
    monkeypatch.setenv("PWD", str(tmp_path))
    text = _execute(TREND)
    assert "nightly-2026-11-03" in text
    regressions = [line for line in text.splitlines() if line.startswith("regression:")]
    assert regressions and all(f"nightly-2026-11-0{SLOW_NIGHT}" in line for line in regressions)


def test_trend_notebook_runs_on_the_fixtures(monkeypatch):
    monkeypatch.delenv("HARNESS_TREND_RUNS", raising=False)
    assert "candidate" in _execute(TREND)


NIGHTS = FIXTURES / "nightly"


def test_trend_notebook_draws_a_changed_load_as_its_own_series_not_comparable(
    monkeypatch, tmp_path
):
    from tests.analysis.test_not_comparable import changed

    for n in (1, 2, 3):
        shutil.copytree(NIGHTS / f"night{n}", tmp_path / f"night{n}")
    changed(tmp_path, 3, "night9", load={"concurrency": 3})
    monkeypatch.setenv("HARNESS_TREND_RUNS", str(tmp_path / "night*"))
    text = _execute(TREND)
    assert "2 series, drawn apart: series 1; series 2: load.concurrency 6 vs 3" in text
    assert "trend verdict: not comparable" in text
    rows = [line for line in text.splitlines() if line.startswith("verdict")]  # the table's
    assert any(row.rstrip().endswith("not comparable") for row in rows)


def test_compare_notebook_formats_as_the_terminal_and_says_not_comparable(monkeypatch, tmp_path):
    from tests.analysis.test_not_comparable import changed

    at3 = changed(tmp_path, 2, "concurrency-3", load={"concurrency": 3})
    runs = (NIGHTS / "night1", NIGHTS / "night2", at3)
    monkeypatch.setenv("HARNESS_COMPARE_RUNS", os.pathsep.join(map(str, runs)))
    text = _execute(NOTEBOOK)
    assert (
        "NOT COMPARABLE (every row at 2%): different load, baseline vs run: load.concurrency"
        in text
    )
    assert re.search(r"\[[+-]\d+\.\d%, [+-]\d+\.\d%\]", text)  # intervals as the terminal's
    assert not re.search(r"\d\.\d{8,}", text)  # no raw 17-digit floats
