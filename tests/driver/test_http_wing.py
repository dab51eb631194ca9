"""The HTTP wing (harness/driver/http/) is one package: nothing outside it imports its modules,
only the public names of its `__init__` (every module under harness/ is parsed, not imported, so
lazy imports inside functions count too)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import harness.driver.http as wing

HARNESS = Path(__file__).resolve().parents[2] / "harness"
WING = "harness.driver.http"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _reaches_inside(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The wing's internals that one import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith(WING + ".")]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: resolved against the importing module's package
        anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join([*anchor, *([base] if base else [])])
    if base.startswith(WING + "."):
        return [base]
    if base == WING:  # only its public names, not its modules
        return [f"{WING}.{a.name}" for a in node.names if a.name not in wing.__all__]
    if base == "harness.driver":
        return [f"{WING}.*" for a in node.names if a.name == "http"]  # the package as a module
    return []


def outside_imports(root: Path) -> list[str]:
    """`path:line: name` of every import of the wing's internals from outside the wing."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        if module == WING or module.startswith(WING + "."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            for name in _reaches_inside(node, module, path.name == "__init__.py"):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {name}")
    return found


@pytest.mark.slow
def test_nothing_outside_the_wing_imports_its_internals():
    assert outside_imports(HARNESS) == []


def test_every_public_name_resolves():
    for name in wing.__all__:
        assert getattr(wing, name) is getattr(
            importlib.import_module(f"{WING}.{wing._MODULE[name]}"), name
        )


def test_the_check_finds_each_way_in(tmp_path):
    """The check can fail: a module, a relative import, a submodule named as a public name."""
    root = tmp_path / "harness"
    (root / "driver" / "http" / "apis").mkdir(parents=True)
    (root / "probe").mkdir()
    (root / "driver" / "http" / "apis" / "x.py").write_text("from harness.driver.http import sse\n")
    (root / "probe" / "a.py").write_text(
        "from harness.driver.http import HTTPTarget\n"  # public: fine
        "from harness.driver.http.sse import SSEParser\n"
        "import harness.driver.http.wire\n"
        "def f():\n    from harness.driver.http import wire\n"
    )
    (root / "driver" / "b.py").write_text("from .http.apis import APIS\nfrom . import http\n")
    assert outside_imports(root) == [
        "harness/driver/b.py:1: harness.driver.http.apis",
        "harness/driver/b.py:2: harness.driver.http.*",
        "harness/probe/a.py:2: harness.driver.http.sse",
        "harness/probe/a.py:3: harness.driver.http.wire",
        "harness/probe/a.py:5: harness.driver.http.wire",
    ]
