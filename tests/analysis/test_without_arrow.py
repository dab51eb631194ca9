"""The base install has no pyarrow (the [parquet] extra): analyze and report read records.jsonl."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NIGHT = Path(__file__).parent / "fixtures" / "nightly" / "night1"

# pyarrow made unimportable, as in an install without the extra
BLOCKED = "import sys; sys.modules['pyarrow'] = None; from harness.app.cli import main; "


def _harness(*args: str, block: bool) -> subprocess.CompletedProcess:
    code = (BLOCKED if block else "from harness.app.cli import main; ") + (
        f"raise SystemExit(main({list(args)!r}))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.mark.slow
def test_analyze_without_pyarrow_gives_the_same_summary_and_no_parquet(tmp_path):
    plain, arrow = tmp_path / "plain", tmp_path / "arrow"
    for folder in (plain, arrow):
        shutil.copytree(NIGHT, folder, ignore=shutil.ignore_patterns("report.html"))
    done = _harness("analyze", str(plain), block=True)
    assert done.returncode == 0, done.stderr
    assert not (plain / "records.parquet").exists()
    assert _harness("analyze", str(arrow), block=False).returncode == 0
    assert (arrow / "records.parquet").is_file()
    assert json.loads((plain / "summary.json").read_text()) == json.loads(
        (arrow / "summary.json").read_text()
    )


@pytest.mark.slow
def test_a_parquet_only_folder_without_pyarrow_names_the_extra(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(NIGHT, run, ignore=shutil.ignore_patterns("report.html"))
    assert _harness("analyze", str(run), block=False).returncode == 0
    (run / "records.jsonl").unlink()
    done = _harness("analyze", str(run), block=True)
    assert done.returncode == 2
    assert "pip install 'agentic-harness[parquet]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
