"""`report/` presents the analyses it is given: it never loads a run folder or runs the analyzer
itself (harness/app/reporting.py composes the two). Parsed, not imported, so lazy imports count."""

from __future__ import annotations

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "harness" / "report"

# The loader's modules, and the analyzer's entry points (a module: all of it; else those names).
FORBIDDEN = {
    "harness.analysis.loader": None,
    "harness.analysis.summary": None,
    "harness.analysis.compare.trend": {"trend"},
    "harness.analysis.compare.verdict": {"compare_runs"},
}


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.lineno, node.module, a.name) for a in node.names]
            out += [(node.lineno, f"{node.module}.{a.name}", None) for a in node.names]
    return out


def loading_imports(root: Path = REPORT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, module, name in _imports(path):
            if module in FORBIDDEN and (FORBIDDEN[module] is None or name in FORBIDDEN[module]):
                found.append(f"{path.relative_to(root)}:{line}: {module} {name or ''}")
    return found


def test_report_never_loads_or_analyses_runs():
    assert loading_imports() == []


def test_the_check_sees_a_lazy_import(tmp_path):
    (tmp_path / "page.py").write_text(
        "def page(d):\n    from harness.analysis.summary import analyze\n    return analyze(d)\n"
    )
    assert loading_imports(tmp_path) == ["page.py:2: harness.analysis.summary analyze"]
