"""The HTTP wing (harness/driver/http/) and the APIs it speaks (harness/driver/apis/) are one
package each: nothing outside one imports its modules, only the public names of its `__init__`
(every module under harness/ is parsed, not imported, so lazy imports inside functions count too).
The APIs' registry is a leaf of the driver: it imports nothing of the HTTP wing or the replay's
settings, so both can read it with no cycle between them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import harness.driver.apis as apis
import harness.driver.http as wing

HARNESS = Path(__file__).resolve().parents[2] / "harness"
WING = "harness.driver.http"
APIS = "harness.driver.apis"
PUBLIC = {WING: wing.__all__, APIS: apis.__all__}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _reaches_inside(node: ast.AST, module: str, is_package: bool, pkg: str) -> list[str]:
    """The internals of package `pkg` that one import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith(pkg + ".")]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: resolved against the importing module's package
        anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join([*anchor, *([base] if base else [])])
    if base.startswith(pkg + "."):
        return [base]
    if base == pkg:  # only its public names, not its modules
        return [f"{pkg}.{a.name}" for a in node.names if a.name not in PUBLIC[pkg]]
    parent, _, leaf = pkg.rpartition(".")
    if base == parent:
        return [f"{pkg}.*" for a in node.names if a.name == leaf]  # the package as a module
    return []


def _parsed(root: Path):
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        yield path, module, ast.parse(path.read_text(encoding="utf-8"), str(path))


def outside_imports(root: Path, pkg: str = WING) -> list[str]:
    """`path:line: name` of every import of `pkg`'s internals from outside it."""
    found = []
    for path, module, tree in _parsed(root):
        if module == pkg or module.startswith(pkg + "."):
            continue
        for node in ast.walk(tree):
            for name in _reaches_inside(node, module, path.name == "__init__.py", pkg):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {name}")
    return found


def leaf_breaches(root: Path) -> list[str]:
    """Imports from the APIs' package of the HTTP wing or the replay's settings."""
    banned = (WING, "harness.driver.config")
    return [
        f"{path.relative_to(root.parent)}:{node.lineno}: {name}"
        for path, module, tree in _parsed(root)
        if module == APIS or module.startswith(APIS + ".")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom | ast.Import) and not _type_checking_only(tree, node)
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
        )
        if any(name == b or name.startswith(b + ".") for b in banned)
    ]


def _type_checking_only(tree: ast.Module, node: ast.AST) -> bool:
    """Inside an `if TYPE_CHECKING:` block (for annotations only, never run)."""
    return any(
        isinstance(block, ast.If)
        and getattr(block.test, "id", None) == "TYPE_CHECKING"
        and any(node is n for stmt in block.body for n in ast.walk(stmt))
        for block in ast.walk(tree)
    )


@pytest.mark.slow
@pytest.mark.parametrize("pkg", [WING, APIS])
def test_nothing_outside_a_wing_imports_its_internals(pkg):
    assert outside_imports(HARNESS, pkg) == []


def test_the_apis_registry_is_a_leaf_of_the_driver():
    assert leaf_breaches(HARNESS) == []


def test_the_leaf_check_can_fail(tmp_path):
    root = tmp_path / "harness"
    (root / "driver" / "apis" / "x").mkdir(parents=True)
    (root / "driver" / "apis" / "x" / "request.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from harness.driver.http.config import HTTPTargetConfig\n"
        "if TYPE_CHECKING:\n    from harness.driver.http.config import HTTPSettings\n"
        "def f():\n    import harness.driver.config\n"
    )
    assert leaf_breaches(root) == [
        "harness/driver/apis/x/request.py:2: harness.driver.http.config",
        "harness/driver/apis/x/request.py:6: harness.driver.config",
    ]


@pytest.mark.parametrize("pkg", [wing, apis])
def test_every_public_name_resolves(pkg):
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None


def test_the_check_finds_each_way_in(tmp_path):
    """The check can fail: a module, a relative import, a submodule named as a public name."""
    root = tmp_path / "harness"
    (root / "driver" / "apis").mkdir(parents=True)
    (root / "probe").mkdir()
    (root / "driver" / "apis" / "x.py").write_text("from harness.driver.http import sse\n")
    (root / "probe" / "a.py").write_text(
        "from harness.driver.http import HTTPTarget\n"  # public: fine
        "from harness.driver.http.sse import SSEParser\n"
        "import harness.driver.http.wire\n"
        "def f():\n    from harness.driver.http import wire\n"
    )
    (root / "driver" / "b.py").write_text("from .http.target import X\nfrom . import http\n")
    (root / "driver" / "c.py").write_text("from .apis.openai import CHAT\nfrom .apis import APIS\n")
    assert outside_imports(root) == [
        "harness/driver/apis/x.py:1: harness.driver.http.sse",
        "harness/driver/b.py:1: harness.driver.http.target",
        "harness/driver/b.py:2: harness.driver.http.*",
        "harness/probe/a.py:2: harness.driver.http.sse",
        "harness/probe/a.py:3: harness.driver.http.wire",
        "harness/probe/a.py:5: harness.driver.http.wire",
    ]
    assert outside_imports(root, APIS) == ["harness/driver/c.py:1: harness.driver.apis.openai"]
