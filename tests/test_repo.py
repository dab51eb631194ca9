"""The repository's own promises: the README's two commands, .ci/run running the second, and
citations only of documents inside the repo."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [
        line for block in blocks for line in block.splitlines() if line and not line.startswith("#")
    ]


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


# Code and docs cite only documents inside the repo: the contract is docs/architecture.md.
OUTSIDE_CITATIONS = re.compile(r"ARCHITECTURE\.md|\.\./shared\b|/work/shared\b")


def _repo_files() -> list[Path]:
    """Tracked files and untracked ones git does not ignore."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_nothing_cites_a_document_outside_the_repo():
    this = Path(__file__).resolve()
    cited = []
    for path in _repo_files():
        if path.resolve() == this or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        cited += [
            f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
            for m in OUTSIDE_CITATIONS.finditer(text)
        ]
    assert cited == []
    assert (ROOT / "docs" / "architecture.md").is_file()


def _layout_modules() -> set[str]:
    """The module paths docs/architecture.md's Layout tree names (indentation gives the folder)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    found, folders = set(), []
    for line in block.splitlines():
        name = line.strip().split(" ")[0] if line.strip() else ""
        depth = (len(line) - len(line.lstrip(" "))) // 2
        if name.endswith("/"):
            folders = [*folders[:depth], name]
        elif name.endswith(".py"):
            found.add("".join(folders[:depth]) + name)
    return found


def test_the_architecture_layout_names_every_module():
    modules = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "harness").rglob("*.py")
        if p.name != "__init__.py"
    }
    named = _layout_modules()
    assert modules - named == set(), "modules missing from docs/architecture.md's Layout"
    assert named - modules == set(), "docs/architecture.md's Layout names modules that do not exist"
