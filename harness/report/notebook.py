"""The dashboards' notebooks read like the terminal: numbers formatted as `harness analyze`
prints them (no `773.000000`), and a harness warning as one sentence, without the source line or
an absolute path (a run folder is named by its folder name)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from harness.analysis.summary_types import Summary
from harness.errors import HarnessWarning
from harness.report.numbers import fmt

_ABSOLUTE = re.compile(r"(?<![\w.])/(?:[^\s:/'\"]+/)*[^\s:/'\"]+")


def sentence(message: object) -> str:
    """A warning's text with every absolute path cut to its last part."""
    return _ABSOLUTE.sub(lambda m: Path(m.group()).name, str(message)).strip()


def _show(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning):
    if issubclass(category, HarnessWarning):
        print(f"warning: {sentence(message)}")
        return
    _default(message, category, filename, lineno, file, line)


def number(value: object) -> str:
    """A cell as the terminal writes it: 773, 6.503k, 0.967; text and empty cells as they are."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    return fmt(value)


def setup() -> None:
    """Call once at a notebook's top: warnings as sentences, tables formatted like the terminal."""
    import pandas as pd

    warnings.showwarning = _show
    warnings.filterwarnings("once", category=HarnessWarning)
    pd.set_option("display.float_format", number)


def table(frame):
    """A frame to display: every number formatted like the terminal's (ints too)."""
    return frame.map(number)


def headline(s: Summary) -> dict[str, object]:
    """The compare notebook's headline rows of one run (checked by mypy against the summary's
    types, as the report's readers are)."""
    return {
        "requests ok": s["requests_ok"],
        "requests failed": s["requests_failed"],
        "TTFT p50 (s)": s["ttft_s"]["p50"],
        "TTFT p90 (s)": s["ttft_s"]["p90"],
        "TPOT p90 (s)": s["tpot_s"]["p90"],
        "ITL p90 (s)": s["itl_s"]["p90"],
        "E2EL p90 (s)": s["e2el_s"]["p90"],
        "P90 interactivity (tok/s/user)": s["interactivity_p90"],
        "E2E-norm. interactivity": s["e2e_interactivity_p90"],
        "TPGS (tok/s/GPU)": s["tpgs"],
        "cache hit rate": s["cache_hit_rate"],
        "ideal cache hit rate": s["ideal_cache_hit_rate"],
    }
