"""Verbs register one way: each module of `cli.COMMAND_MODULES` adds its verbs in `register`,
and no other module of harness/ adds a verb or a sub-verb."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import harness
from harness.app import cli
from harness.app.parser import Parser

HARNESS = Path(harness.__file__).resolve().parent


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(HARNESS.parent).with_suffix("").parts)


def _adds_parsers(path: Path) -> list[int]:
    """Lines where `path` calls `<subparsers>.add_parser(...)`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_parser"
    ]


@pytest.mark.slow
def test_only_the_listed_verb_modules_add_verbs():
    strays = [
        f"{path}:{line}"
        for path in sorted(HARNESS.rglob("*.py"))
        if _module_name(path) not in cli.COMMAND_MODULES
        for line in _adds_parsers(path)
    ]
    assert strays == [], "add a verb in a module of cli.COMMAND_MODULES (CONTRIBUTING, a verb)"


def _verbs_of(name: str) -> list[str]:
    sub = Parser(prog="harness").add_subparsers(dest="verb")
    importlib.import_module(name).register(sub)
    return list(sub.choices)


@pytest.mark.parametrize("name", cli.COMMAND_MODULES)
def test_each_listed_module_registers_verbs_of_its_own(name):
    assert _verbs_of(name), f"{name}.register added no verb"


def test_the_parser_has_exactly_the_listed_modules_verbs():
    listed = [verb for name in cli.COMMAND_MODULES for verb in _verbs_of(name)]
    sub = next(a for a in cli.build_parser()._actions if a.dest == "verb")
    assert sorted(listed) == sorted(set(listed)), "two modules register the same verb"
    assert list(sub.choices) == listed
