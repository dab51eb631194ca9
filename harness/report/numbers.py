"""Numbers as a person reads them: 32.1k, 1.25M, 0.0000123, never 3.214e+04.

`fmt` is the one formatter of the report and the terminal: a format spec as Python's, except
that where Python would switch to e-notation the value is written with a k/M/G/T suffix (large)
or in plain decimals (small). `count` writes token and request counts: exact below 10,000,
with a suffix above.
"""

from __future__ import annotations

import math

_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt(value, spec: str = ".4g") -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    if not isinstance(value, int | float):  # e.g. a tool's "inf" request rate, as it wrote it
        return str(value)
    text = format(value, spec)
    return human(value) if "e" in text else text


def human(value, digits: int = 3) -> str:
    """`digits` significant digits: 33.7k, 1.25M; below 1e-4 in plain decimals (0.0000123)."""
    if value is None or value != value:
        return "-"
    x = float(value)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    size = abs(x)
    if size >= 1e4:
        scale, suffix = next((s, n) for s, n in _SUFFIXES if size >= s)
        return f"{_significant(x / scale, digits)}{suffix}"
    if size and size < 1e-4:
        decimals = digits - 1 - math.floor(math.log10(size))
        return f"{x:.{decimals}f}".rstrip("0")
    return _significant(x, digits + 1 if size >= 1e3 else digits)


def _significant(x: float, digits: int) -> str:
    """`digits` significant digits, trailing zeros dropped (12.0 -> 12), no e-notation."""
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def count(value) -> str:
    """A count: exact below 10,000 (9876), with a suffix above (23.1k, 1.25M)."""
    if value is None or value != value:
        return "-"
    return f"{value:.0f}" if abs(value) < 1e4 else human(value)


def share(part, whole) -> str:
    """`part` of `whole` in percent (one decimal), '-' when there is no whole."""
    if not whole or part is None or part != part:
        return "-"
    return f"{100 * part / whole:.1f} %"
