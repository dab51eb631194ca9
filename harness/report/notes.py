"""The report's notes and banners, as fragments of templates/notes.html: the missed tokens by
category (a small table; what each means, the granularity and the server rules behind a
disclosure), each run's measured window, and the banners (simulated timings, imported runs,
every warning in one collapsed banner)."""

from __future__ import annotations

import re

from markupsafe import Markup

from harness.analysis.summary_types import Analysis
from harness.report.cache_words import granularity_line, token_space_line
from harness.report.hosted_cache import hosted_note
from harness.report.jinja import template_module
from harness.report.misses import LABELS, approximate_tag, label, meanings, rule_rows
from harness.report.numbers import count, fmt, share


def miss_table(analyses: list[Analysis]) -> Markup:
    """Missed prompt tokens by category as a small table (a column per run, each share of all
    prompt tokens); what each category means, the granularity and the server rules behind a
    disclosure."""
    present = _present(analyses)
    categories = [k for k in LABELS if k in present]
    rows = [[label(k), *(_tokens(a, k) for a in analyses)] for k in categories]
    rows.append(["all missed", *(_missed(a) for a in analyses)])
    header = ["missed prompt tokens (share of all)", *(a.run.name for a in analyses)]
    return _notes().miss_table(header, rows, meanings(present), [_rules(a) for a in analyses])


def _tokens(a: Analysis, category: str) -> str:
    c = a.summary["cache"]
    tokens = c["miss_tokens"].get(category) or 0.0
    return f"{count(tokens)} ({_share(tokens, c.get('prompt_tokens'))})"


def _missed(a: Analysis) -> str:
    c = a.summary["cache"]
    missed, prompt = sum(c["miss_tokens"].values()), c.get("prompt_tokens")
    return f"{count(missed)} of {count(prompt)} ({_share(missed, prompt)})"


def _share(part: float, whole: float | None) -> str:
    """'2.9 %'; none is '0 %', and a share too small to show at one decimal '<0.1 %'."""
    if whole and not part:
        return "0 %"
    if part and whole and part / whole < 0.0005:
        return "<0.1 %"
    return share(part, whole)


def _rules(a: Analysis) -> dict:
    """One run's evidence behind its split: granularity, server rules, token space, hosted rules."""
    c = a.summary["cache"]
    grain = c.get("granularity")
    return {
        "name": a.run.name,
        "granularity": granularity_line(grain) if grain else "",
        "rules": rule_rows(c),
        "approximate": approximate_tag(c).strip(),
        "space": token_space_line(c.get("token_space")),
        "hosted": hosted_note(c),
    }


def _notes():
    return template_module("notes.html")


def _present(analyses: list[Analysis]) -> set[str]:
    """The miss categories some run has tokens in (and evicted, whose 0 is a finding)."""
    miss = [a.summary["cache"]["miss_tokens"] for a in analyses]
    return {"cold", "evicted", *(k for m in miss for k, v in m.items() if v)}


def window_note(analyses: list[Analysis]) -> Markup:
    """Each run's measured window (summary.json `window`): the span shaded above, why, and the load it held."""
    runs = [_window_row(a) for a in analyses if a.summary.get("window")]
    return _notes().window_note(runs)


def _window_row(a: Analysis) -> dict:
    w = a.summary["window"]
    held = (
        f"; {fmt(w['tasks_in_flight_mean'], '.3g')} tasks in flight of target {w['target_tasks']}"
        f" ({fmt(w['tasks_held'], '.1%')} held)"
        if w.get("target_tasks")
        else f"; {fmt(w['tasks_in_flight_mean'], '.3g')} tasks in flight"
    )
    t0 = a.run.records["t_sent"].min()
    return {
        "span": f"{fmt(w['start_s'], '.6g')}-{fmt(w['end_s'], '.6g')}",
        "name": a.run.name,
        "start": fmt(w["start_s"] - t0, ".4g"),
        "end": fmt(w["end_s"] - t0, ".4g"),
        "mode": w["mode"],
        "stable": w["stable"],
        "reason": w["reason"],
        "held": held,
        "requests": fmt(w["requests_in_flight_mean"], ".3g"),
    }


def banners(analyses: list[Analysis]) -> list[Markup]:
    notes = _notes()
    out = []
    simulated = [a.run.name for a in analyses if a.run.simulated]
    if simulated:
        out.append(notes.simulated(simulated))
    for a in analyses:
        imported = a.run.manifest.get("imported")
        if imported:
            notes_of = imported.get("notes", [])
            name = a.run.name
            out.append(notes.imported(name, imported["tool"], imported["source"], notes_of))
    out.append(warnings_banner(analyses))
    return out


def warnings_banner(analyses: list[Analysis]) -> Markup | str:
    """Every run's warnings in one collapsed banner: alike warnings (the same words, other
    numbers or run paths) are one item naming its runs, so a sweep does not open with a banner
    per point."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for a in analyses:
        for w in a.summary.get("warnings", []):
            text = w.replace(f"{a.run.path}: ", "").replace(str(a.run.path), "the run folder")
            groups.setdefault(re.sub(r"\d+(\.\d+)?", "#", text), []).append((a.run.name, text))
    if not groups:
        return ""
    items = [_warning_item(members, len(analyses)) for members in groups.values()]
    n = sum(len(m) for m in groups.values())
    first = next(iter(groups.values()))[0][1]
    more = (
        f" (and {len(groups) - 1} more kind{'s' if len(groups) > 2 else ''})"
        if len(groups) > 1
        else ""
    )
    return _notes().warnings(n, _short(first), more, items)


def _warning_item(members: list[tuple[str, str]], runs: int) -> dict:
    texts = list(dict.fromkeys(t for _, t in members))
    names = list(dict.fromkeys(n for n, _ in members))
    who = "" if runs == 1 else ", ".join(names)
    if len(texts) == 1:
        return {"text": texts[0], "who": who, "alike": None, "each": None}
    return {"text": texts[0], "who": who, "alike": len(members) - 1, "each": members}


def _short(text: str, limit: int = 140) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
