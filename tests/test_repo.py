"""The repository's own promises: the README's two commands, and .ci/run running the second."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line and not line.startswith("#")]


def test_quick_start_has_exactly_two_commands():
    assert len(_quickstart_commands()) == 2


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = _quickstart_commands()[1]
    assert "pytest" in test_command
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci_lines


def test_main_job_runs_the_quickstart_scenario():
    main_command = _quickstart_commands()[0]
    assert main_command.endswith("harness run scenarios/quickstart.yaml")
    assert (ROOT / "scenarios" / "quickstart.yaml").is_file()
