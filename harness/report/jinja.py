"""The report's HTML comes from the jinja2 templates in report/templates/, autoescaped: a value a
template prints is escaped unless it is a fragment another template rendered (jinja2's Markup),
so no code here escapes by hand. Python prepares the values; the templates hold the markup."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from functools import cache
from typing import Any

from jinja2 import Environment, FileSystemBytecodeCache, PackageLoader
from markupsafe import Markup


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("harness.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(),
    )


class _Compiled(FileSystemBytecodeCache):
    """Compiled templates kept in jinja2's own temp folder, checked against each template's
    source: a page no longer compiles its templates on every start (a tenth of its render
    time). A cache that cannot be written (a full or read-only disk) is skipped, not an error:
    the page is written all the same."""

    def dump_bytecode(self, bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache() -> FileSystemBytecodeCache | None:
    try:
        return _Compiled()
    except (OSError, RuntimeError):  # no temp folder of this user's own: compile every time
        return None


def render(template: str, **context: Any) -> Markup:
    return Markup(_environment().get_template(template).render(**context))


def template_module(template: str) -> Any:
    """A template's macros, to call from Python: each returns a fragment (Markup)."""
    return _environment().get_template(template).module


def macro(name: str) -> Any:
    """A macro of fragments.html (a table, a figure, collapsed details ...)."""
    return getattr(template_module("fragments.html"), name)


def table(header: list[str], rows: Sequence[Sequence[object]], note: str = "") -> Markup:
    """A table, its note above it; a cell that says "worse" is marked."""
    return macro("table")(header, rows, note)


def join(fragments: list, sep: str = "\n") -> Markup:
    """Rendered fragments side by side (each escaped unless it is already Markup)."""
    return Markup(sep).join(fragments)
