"""The report's headline strip: the numbers the harness exists for, per run, with SLO verdicts.

TTFT p90, P90 interactivity, TPGS (split cached / uncached input / output, with the device it was
measured on and the share that is cached prompt tokens), the server's prefix-cache hit rate
beside the ideal, and where the missed prompt tokens went (every category summary.json has, as
a share of prompt tokens). A card shows the verdict of the run's SLO on that metric
(`goodput.attained`, docs/metrics.md) when one was set, and says so when none was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from harness.analysis.summary_types import Analysis, Summary
from harness.report.colors import outcome_color
from harness.report.jinja import render
from harness.report.misses import label as miss_label
from harness.report.numbers import count, fmt, share
from harness.report.tested import tpgs_caveat

CARDS = (
    ("ttft_p90", "TTFT p90", "ttft"),
    ("interactivity_p90", "P90 interactivity", "interactivity"),
    ("tpgs", "TPGS", None),
    ("cache_hit", "Cache hit vs ideal", None),
    ("misses", "Where the cache missed", None),
)


def _slo_line(summary: Summary, metric: str) -> tuple[str, str]:
    """(text, css class) of the SLO on `metric` at the 90th percentile, if the run set one."""
    g = summary.get("goodput") or {}
    for name, result in (g.get("attained") or {}).items():
        if name == f"{metric}_p90":
            bound = g["slos"][name]
            sign = ">=" if metric == "interactivity" else "<="
            unit = " tok/s/user" if metric == "interactivity" else " s"
            verdict = {True: ("met", "ok"), False: ("MISSED", "bad"), None: ("no data", "")}[
                result["met"]
            ]
            return f"SLO {sign} {bound:g}{unit}: {verdict[0]}", verdict[1]
    return "no SLO set", "none"


def _value(s: Summary, key: str) -> tuple[str, str, str]:
    """(number, unit, the line under them): the unit smaller, so the two fit one line."""
    if key == "ttft_p90":
        return (
            fmt(s["ttft_s"]["p90"]),
            "s",
            f"p50 {fmt(s['ttft_s']['p50'])} s · {s['ttft_s']['count']} requests",
        )
    if key == "interactivity_p90":
        return (
            fmt(s["interactivity_p90"]),
            "tok/s/user",
            "= 1 / p90(TPOT): 90 % of requests reach it",
        )
    if key == "tpgs":
        parts = s["tpgs_parts"]
        split = (
            f"cached {fmt(parts['cached'])} · uncached {fmt(parts['uncached_input'])} · "
            f"output {fmt(parts['output'])}"
        )
        return fmt(s["tpgs"]), "tok/s/GPU", split
    if key == "misses":
        c = s["cache"]
        missed = sum(v for _, _, v in miss_parts(c["miss_tokens"]))
        return (
            share(missed, c.get("prompt_tokens")),
            "missed",
            (f"{count(missed)} of {count(c.get('prompt_tokens'))} prompt tokens"),
        )
    hit, ideal = s["cache_hit_rate"], s["ideal_cache_hit_rate"]
    return f"{fmt(hit, '.3f')} / {fmt(ideal, '.3f')}", "", "server / ideal (infinite cache)"


def miss_parts(miss: dict) -> list[tuple[str, str, float]]:
    """(category, label, tokens) of every miss category with tokens, in summary.json's order; a
    category given as a mapping (sub-causes) is listed by its parts."""
    out: list[tuple[str, str, float]] = []
    for key, value in miss.items():
        subs = value.items() if isinstance(value, dict) else [("", value)]
        for sub, tokens in subs:
            if isinstance(tokens, int | float) and tokens > 0:
                label = miss_label(key)
                name = f"{label} {sub.replace('_', ' ')}".strip()
                out.append((sub or key, name, float(tokens)))
    return out


def _miss_bar(s: Summary) -> list[dict]:
    """Prompt tokens as one bar: hit, then each miss category; the legend gives each share."""
    c = s["cache"]
    total = c.get("prompt_tokens") or 0
    hit = total - sum(v for _, _, v in miss_parts(c["miss_tokens"]))
    parts = [("hit", "hit", hit), *miss_parts(c["miss_tokens"])] if total else []
    return [  # hit first: its entry in the legend too
        {
            "key": key,
            "label": label,
            "pct": 100 * tokens / total,
            "color": outcome_color(key),
            "share": share(tokens, total),
        }
        for key, label, tokens in parts
    ]


def _server_side(summary: Summary, on_disk: Mapping[str, Any]) -> str:
    """The hit rate the server's own /metrics counters gave over the run, where they were scraped."""
    server = summary.get("server_cache") or on_disk.get("server_cache") or {}
    rate = server.get("hit_rate")
    return "" if rate is None else f" · server /metrics {rate:.3f}"


def headline_strip(analyses: list[Analysis]) -> Markup:
    strips = [
        {"name": a.run.name, "show_name": len(analyses) > 1, "cards": [_card(a, *c) for c in CARDS]}
        for a in analyses
    ]
    return render("headline.html", strips=strips)


def _card(a: Analysis, key: str, label: str, slo_metric: str | None) -> dict:
    s = a.summary
    value, unit, sub = _value(s, key)
    if key == "cache_hit" and (
        a.run.manifest.get("imported") and s["ideal_cache_hit_rate"] in (0, None)
    ):
        value, sub = (
            f"{fmt(s['cache_hit_rate'], '.3f')} / n/a",
            "server / ideal: no trace, no ideal",
        )
    if key == "cache_hit":
        sub += _server_side(s, a.run.summary or {})
    slo, cls = _slo_line(s, slo_metric) if slo_metric else ("", "")
    return {
        "key": key,
        "label": label,
        "value": value,
        "unit": unit,
        "sub": sub,
        "caveat": tpgs_caveat(s) if key == "tpgs" else None,
        "bar": _miss_bar(s) if key == "misses" else None,
        "slo": slo,
        "slo_class": cls,
    }
