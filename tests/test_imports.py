"""Imports across harness packages go one way (the table in docs/architecture.md, "Layout").

Every module under harness/ is parsed (not imported), so lazy imports inside functions count too.
A package may import itself, the low-level modules, and the packages its row names; the
composition (`harness/app/`: the CLI, its verbs, scenario -> parts) composes everything and may
import anything, and nothing but `harness/__main__.py` imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "harness"

# Leaf modules every package may use; they import only each other. "" is harness/__init__.py.
LOW_LEVEL = {
    "",
    "errors",
    "schema",
    "yamlconf",
    "vocab",
    "prometheus",
    "atomic",
    "exit_codes",
    "collector",
}

# The package that composes every other; no row: it may import anything, nothing imports it.
COMPOSITION = "app"

ALLOWED = {
    "engine": set(),
    "serving": {"engine"},
    "trace": set(),
    "analysis": {"trace"},
    "report": {"analysis", "trace"},
    "driver": {"trace"},
    "importers": {"driver"},
    "distributed": {"driver", "trace", "analysis"},
    "probe": {"driver"},
    "whatif": {"engine", "analysis", "trace", "driver"},
    "export": {"driver", "analysis"},
    "record": {"driver", "trace"},
}

# Third-party libraries a package must never import: computing stays apart from presenting, and
# the statistics (scipy's) stay in the computing package.
FORBIDDEN_LIBRARIES = {
    "analysis": {"matplotlib", "seaborn"},
    "app": {"scipy"},
    "report": {"scipy"},
}

# The one adapter that lets the driver run the reference engine in-process.
ADAPTERS = {"harness.driver.engine_target": {"engine", "serving"}}


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """A made-up harness/ tree (file -> text) for a check to run on; its root."""
    pkg = tmp_path / "harness"
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(dotted: str) -> str | None:
    """The package or top-level module of harness a dotted name belongs to (None: not harness)."""
    parts = dotted.split(".")
    if parts[0] != "harness":
        return None
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every module `path` imports, at any depth."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if base == "harness":  # `from harness import x`: x is the unit, or harness/__init__
                found += [
                    (node.lineno, "harness" if a.name.startswith("__") else f"harness.{a.name}")
                    for a in node.names
                ]
            else:
                found.append((node.lineno, base))
    return found


def _allowed(module: str, source: str, target: str) -> bool:
    if target == source or target in LOW_LEVEL:
        return True
    if source in LOW_LEVEL:
        return False
    if source not in ALLOWED:  # a top-level module
        return True
    return target in ALLOWED[source] | ADAPTERS.get(module, set())


def violations(root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        source = _unit(module)
        nested = path.parent != root
        if nested and source not in ALLOWED and source != COMPOSITION:
            out.append(f"{path}: package harness.{source} has no row in the import table")
            continue
        imports = _imports(path, module)
        out += _forbidden_libraries(path, source, imports)
        for line, name in imports:
            if _unit(name) is None:
                continue
            if not _allowed(module, source, _unit(name)):
                row = sorted(ALLOWED.get(source, set()) | ADAPTERS.get(module, set()))
                out.append(
                    f"{path}:{line}: {module} imports {name} "
                    f"(harness.{source or '__init__'} may import {row or 'none'} and low-level)"
                )
    return out


def _forbidden_libraries(path: Path, source: str, imports: list[tuple[int, str]]) -> list[str]:
    banned = FORBIDDEN_LIBRARIES.get(source, set())
    return [
        f"{path}:{line}: harness.{source} imports {name} "
        f"({'it computes; harness.report presents' if source == 'analysis' else 'statistics live in harness.analysis'})"
        for line, name in imports
        if name.split(".")[0] in banned
    ]


@pytest.mark.slow
def test_imports_follow_the_table():
    assert violations() == []


def test_every_package_has_a_row():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - {COMPOSITION} == set(ALLOWED)


def test_a_planted_upward_import_is_reported(tmp_path):
    pkg = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "engine/__init__.py": "",
            "engine/core.py": "from harness.errors import X\n\ndef f():\n    from harness.driver import target\n",
            "serving/__init__.py": "",
            "serving/server.py": "from ..engine import core\nfrom harness import trace\n",
            "driver/__init__.py": "",
            "driver/engine_target.py": "from harness.serving import server\n",
            "driver/replay.py": "from harness.serving import server\n",
            "runner.py": "from harness.driver import replay\nfrom harness.serving import server\n",
        },
    )
    found = violations(pkg)
    assert [v.split(": ", 1)[1].split(" (")[0] for v in found] == [
        "harness.driver.replay imports harness.serving",
        "harness.engine.core imports harness.driver",
        "harness.serving.server imports harness.trace",
    ]
    assert all(":" in v.split(" ")[0] for v in found)  # file:line


def test_analysis_never_presents(tmp_path):
    """A plotting import in the computing package, or an import of the presenting one, is reported."""
    pkg = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "analysis/__init__.py": "",
            "analysis/metrics.py": "def f():\n    import seaborn\n",
            "analysis/summary.py": "from matplotlib import pyplot\nfrom harness.report import html\n",
            "report/__init__.py": "",
            "report/html.py": "import matplotlib\nfrom harness.analysis import summary\n",
            "report/z.py": "def f():\n    from scipy.stats import t\n",
            "app/__init__.py": "",
            "app/rates.py": "def f():\n    from scipy.stats import binomtest\n",
        },
    )
    found = [v.split(": ", 1)[1].split(" (")[0] for v in violations(pkg)]
    assert found == [
        "harness.analysis imports seaborn",
        "harness.analysis imports matplotlib",
        "harness.analysis.summary imports harness.report",
        "harness.app imports scipy.stats",
        "harness.report imports scipy.stats",
    ]


def test_nothing_below_the_composition_imports_it():
    """harness/app/ composes the packages; a package or a ground module importing it would be a
    cycle through the top (only `python -m harness` calls into it)."""
    bad = [
        f"{path}:{line}: {name}"
        for path in sorted(ROOT.rglob("*.py"))
        if _unit(_module_name(path, ROOT)) != COMPOSITION and path.name != "__main__.py"
        for line, name in _imports(path, _module_name(path, ROOT))
        if _unit(name) == COMPOSITION
    ]
    assert bad == []


def test_the_root_holds_only_the_ground():
    """The root of harness/ holds the low-level modules only; the composition lives in app/."""
    root = {p.stem for p in ROOT.glob("*.py")} - {"__init__", "__main__"}
    assert root <= LOW_LEVEL, sorted(root - LOW_LEVEL)


def _module_level(tree: ast.Module):
    """Import statements that run when the module is imported (not inside a function, not under
    `if TYPE_CHECKING:`)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            todo += node.orelse
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            todo += [n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt)]


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the harness modules importing it runs at once: each module it imports at its
    top, and the packages above those (their `__init__` runs first), but not the packages the
    importer itself lives in (they are already being imported) unless it takes a name from one
    (`from harness.pkg import name` in pkg/sub.py needs pkg's `__init__` to have defined it)."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        edges, named = set(), set()
        for node in _module_level(tree):
            for name in _targets(node, module, path.name == "__init__.py", paths):
                edges |= {a for a in [*_ancestors(name), name] if a in paths}
                named.add(name)
        graph[module] = edges - {module, *(set(_ancestors(module)) - named)}
    return graph


def _targets(node, module: str, is_package: bool, paths) -> list[str]:
    """The modules one import statement names: `from pkg import sub` names `pkg.sub` (and `pkg`
    only for the names that are not its submodules)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(anchor + ([node.module] if node.module else []))
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in paths]
    return subs if len(subs) == len(node.names) else [base, *subs]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_level_import_cycle():
    assert cycles(import_graph()) == []


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    """The knot the HTTP wing once hid: a module imports a package whose `__init__` leads back."""
    pkg = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "driver/__init__.py": "",
            "driver/config.py": "from harness.driver.http.apis import APIS\n",
            "driver/http/__init__.py": "from harness.driver.http.target import T\n",
            "driver/http/target.py": "from harness.driver.config import C\n",
            "driver/http/apis.py": "APIS = {}\n",
            "driver/ok.py": "def f():\n    from harness.driver.config import C\n",
        },
    )
    assert cycles(import_graph(pkg)) == [
        ["harness.driver.config", "harness.driver.http", "harness.driver.http.target"]
    ]


def test_a_cycle_through_the_importers_own_package_is_found(tmp_path):
    """A submodule taking a name from its own package, whose `__init__` imports that submodule:
    importing either fails on a partially initialized module."""
    pkg = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "trace/__init__.py": "from harness.trace.tools import read\n\ndef run():\n    pass\n",
            "trace/tools.py": "from harness.trace import run\n\ndef read():\n    pass\n",
            "trace/ok.py": "from harness.trace import tools\nfrom . import tools as t\n",
        },
    )
    assert cycles(import_graph(pkg)) == [["harness.trace", "harness.trace.tools"]]


def test_no_lazy_loader():
    """No module-level `__getattr__`: a package's names are imported, not loaded on first use
    (a loader hides an import cycle instead of untying it)."""
    found = [
        str(path.relative_to(ROOT.parent))
        for path in sorted(ROOT.rglob("*.py"))
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
    ]
    assert found == []


# Where a lazy import of a harness module is the point: the verbs import their heavy modules in
# their handlers (`harness --help` stays fast), and a module that needs an optional extra's
# library is imported only on the path that needs it (the base install lacks it).
COMMAND_LAYER = "harness.app"


def _optional_libraries() -> set[str]:
    from harness.app.extras import EXTRAS

    return set(EXTRAS)


def lazy_imports(root: Path = ROOT) -> list[str]:
    """`path:line: module -> imported` for each function-local import of a harness module outside
    the command layer, unless the imported module needs an optional extra's library at its top."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    optional = _optional_libraries()
    needs_extra = {
        module
        for module, path in paths.items()
        for node in _module_level(ast.parse(path.read_text(encoding="utf-8")))
        for name in _targets(node, module, path.name == "__init__.py", paths)
        if name.split(".")[0] in optional
    }
    found = []
    for module, path in sorted(paths.items()):
        if module == COMMAND_LAYER or module.startswith(COMMAND_LAYER + "."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        local = {
            n
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(fn)
            if isinstance(n, ast.Import | ast.ImportFrom)
        }
        rel = path.relative_to(root.parent)
        for node in sorted(local, key=lambda n: n.lineno):
            for name in _targets(node, module, path.name == "__init__.py", paths):
                if name in paths and name != module and name not in needs_extra:
                    found.append(f"{rel}:{node.lineno}: {module} -> {name}")
        found += [f"{rel}:{line}: {module} -> {name}" for line, name in _loaded_by_name(tree)]
    return found


def _loaded_by_name(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of each `import_module("harness...")` or `__import__("harness...")`: a
    harness module loaded by a string the import checks cannot follow."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if isinstance(first, ast.JoinedStr) and first.values:
            first = first.values[0]
        text = first.value if isinstance(first, ast.Constant) else None
        if called in ("import_module", "__import__") and str(text).startswith("harness"):
            found.append((node.lineno, ast.unparse(node.args[0])))
    return found


def test_no_lazy_import_of_a_harness_module_outside_the_verbs():
    assert lazy_imports() == []


def test_the_lazy_import_check_can_fail(tmp_path):
    pkg = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "analysis/__init__.py": "",
            "analysis/a.py": "def f():\n    from harness.analysis import b\n",
            "analysis/b.py": "X = 1\n",
            "analysis/c.py": "def f():\n    from harness.analysis import arrowy\n",
            "analysis/arrowy.py": "import pyarrow\n",
            "app/__init__.py": "",
            "app/verb.py": "def f():\n    from harness.analysis import b\n",
            "engine/__init__.py": "",
            "engine/e.py": "if True:\n    def g():\n        import harness.analysis.b\n",
            "trace/t.py": "from importlib import import_module\n\n"
            "def f(n):\n    return import_module(f'harness.trace.{n}')\n",
            "app/cli.py": "import importlib\nimportlib.import_module('harness.app.verb')\n",
        },
    )
    assert lazy_imports(pkg) == [
        "harness/analysis/a.py:2: harness.analysis.a -> harness.analysis.b",
        "harness/engine/e.py:3: harness.engine.e -> harness.analysis.b",
        "harness/trace/t.py:4: harness.trace.t -> f'harness.trace.{n}'",
    ]
