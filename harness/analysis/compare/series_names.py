"""Each series of a trend named by what sets it apart from the others, for its legend: its load
("concurrency 6"), a setting of its target ("max_num_batched_tokens 1024"), or its trace; the
settings read as a comparison reads them (compare/settings.py)."""

from __future__ import annotations

from harness.analysis.compare.comparable import trace_identity
from harness.analysis.compare.settings import load_settings, target_config
from harness.analysis.summary_types import Analysis

SHOWN = 2  # settings named per series at most
LOAD_NAMES = ("load.mode", "load.concurrency", "load.session_rate")  # one series: its load


def series_names(analyses: list[Analysis], series: list[int]) -> list[str]:
    """One name per series (`series[i]`: the series of `analyses[i]`), from its first run."""
    first: dict[int, Analysis] = {}
    for a, s in zip(analyses, series, strict=True):
        first.setdefault(s, a)
    facts = [_facts(first[s]) for s in sorted(first)]
    keys = list(dict.fromkeys(k for f in facts for k in f))
    differ = [k for k in keys if len({repr(f.get(k)) for f in facts}) > 1]
    if not differ:  # one series, or series told apart by nothing named here: say their load
        differ = [k for k in LOAD_NAMES if k in keys]
    return [", ".join(_say(k, f.get(k)) for k in differ[:SHOWN]) or "-" for f in facts]


def _facts(a: Analysis) -> dict:
    """The settings that make a series, in the order a reader looks for them."""
    out = {k: v for k, v in (load_settings(a) or {}).items() if v is not None}
    out.update(target_config(a))
    trace = trace_identity(a)
    if trace and trace[1]:
        out["trace"] = trace[1][:12]
    return out


def _say(key: str, value) -> str:
    if key == "load.mode":
        return {"closed": "closed loop", "open": "open loop"}.get(str(value), str(value))
    if key == "load.session_rate":
        return f"{value:g} tasks/s"
    name = key.rsplit(".", 1)[-1]  # a target setting by its own name
    return f"{name.replace('_', ' ') if key.startswith('load.') else name} {value}"
