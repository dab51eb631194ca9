"""YAML config files (scenarios, workload profiles): read, override, validate, with errors that
name the file, the line and the dotted field.

`--set a.b=value` overrides are applied to the raw document before validation, so they are
checked exactly like the file itself.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import InputError

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """A config section: frozen, unknown keys rejected. A field whose YAML key differs from the
    code's name declares the key as its alias: files give the alias only (`validate_model`),
    code may give either, and `model_dump(by_alias=True)` writes the files' keys."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True
    )


def read_yaml(path: Path, error: type[InputError], what: str) -> tuple[Any, yaml.Node | None]:
    """The document and its node tree (for line numbers)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror}", path=path) from None
    try:
        return yaml.safe_load(text), yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(f"invalid YAML: {problem}", path=path, line=line) from None


def set_path(doc: dict, dotted: str, value: Any, error: type[InputError]) -> None:
    """Set a dotted key in a nested mapping, creating mappings on the way."""
    keys = dotted.split(".")
    node = doc
    for key in keys[:-1]:
        nxt = node.get(key)
        if nxt is None:
            nxt = node[key] = {}
        if not isinstance(nxt, dict):
            raise error(f"cannot set '{dotted}': '{key}' is not a mapping", field=dotted)
        node = nxt
    node[keys[-1]] = value


def parse_set(item: str, error: type[InputError]) -> tuple[str, Any]:
    """'load.concurrency=8' -> ('load.concurrency', 8); the value is read as YAML."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise error(f"--set expects key=value, got {item!r}")
    try:
        return key.strip(), yaml.safe_load(raw)
    except yaml.YAMLError:
        raise error(f"--set {key}: value is not valid YAML") from None


def line_of(root: yaml.Node | None, loc: tuple) -> int | None:
    """1-based line of the YAML node at `loc`; None when the file has no such node."""
    node = root
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
        else:
            return None
    return node.start_mark.line + 1 if node is not None else None


def overridden(loc: tuple, overrides: tuple[str, ...]) -> bool:
    """Whether the value at `loc` came from an override (`--set`), not from the file."""
    dotted = ".".join(str(p) for p in loc)
    return any(
        dotted == o or dotted.startswith(o + ".") or o.startswith(dotted + ".") for o in overrides
    )


def validate_model(
    model: type[M],
    doc: Any,
    error: type[InputError],
    *,
    source: str,
    root: yaml.Node | None = None,
    what: str = "file",
    overrides: tuple[str, ...] = (),
) -> M:
    """The validated model; an error names the file, the line (when the value came from the file,
    not from an override) and the dotted field."""
    if not isinstance(doc, dict):
        raise error(f"a {what} must be a YAML mapping", path=source)
    try:
        return model.model_validate(doc, by_alias=True, by_name=False)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"].removeprefix(
            "Value error, "
        )  # a validator's ValueError reads as its message
        if err["type"] == "extra_forbidden":
            msg = "unknown key" + did_you_mean(str(loc[-1]), known_keys(model, loc[:-1]))
        field = ".".join(str(p) for p in loc) or None
        line = None if overridden(loc, overrides) else line_of(root, loc)
        raise error(msg, path=source, line=line, field=field) from None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """'; did you mean 'sessions'?' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The YAML keys the model at `loc` (a path of field names from `model`) accepts."""
    current: type[BaseModel] | None = model
    for part in loc:
        field = _field(current, str(part)) if current is not None else None
        current = _model_in(field.annotation) if field is not None else None
    if current is None:
        return []
    return [f.alias or name for name, f in current.model_fields.items()]


def _field(model: type[BaseModel], key: str):
    fields = model.model_fields
    return fields.get(key) or next((f for f in fields.values() if f.alias == key), None)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (itself, or inside Optional / a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in typing.get_args(annotation) if (m := _model_in(a))), None)
