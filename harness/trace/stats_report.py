"""Plain-text tables of `compute_stats` output: the fidelity table, then distributions."""

from __future__ import annotations

from typing import TextIO

_DISTS = (
    ("turns_per_main_session", "turns per main session"),
    ("turns_per_subagent", "turns per subagent"),
    ("prompt_tokens", "prompt tokens per request"),
    ("output_tokens", "output tokens per request"),
    ("new_input_tokens", "new input tokens per turn"),
    ("think_s", "think time per turn (s)"),
    ("subagents_per_main_session", "subagents per main session"),
)


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and abs(v) < 10 and v != int(v):
        return f"{v:.3f}"
    return f"{v:,.0f}"


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")
        if j == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")


def _think_table(stats: dict, out: TextIO) -> None:
    """The trace's gaps beside the profile's model and the public corpus's."""
    rows = [["think time before a request (s)", "p50", "p90", "p99"]]
    rows.append(["this trace"] + [_num(stats["think_s"][q]) for q in ("p50", "p90", "p99")])
    if "profile_think_s" in stats:
        rows.append(
            [f"profile {stats['profile']} (model)"]
            + [_num(stats["profile_think_s"][q]) for q in ("p50", "p90", "p99")]
        )
    rows.append(
        ["public Claude Code corpus"]
        + [_num(stats["corpus_think_s"][q]) for q in ("p50", "p90", "p99")]
    )
    out.write("\n")
    _table(rows, out)


def render(stats: dict, name: str, out: TextIO) -> None:
    out.write(
        f"{name}: {stats['sessions']} sessions ({stats['main_sessions']} main, "
        f"{stats['subagent_sessions']} subagents), {stats['requests']} requests\n\n"
    )
    rows = [["fidelity (AgentX)", "target", "trace", "met"]]
    for r in stats["fidelity"]:
        value = r["value"]
        shown = (
            f"{value:.1%}"
            if r["key"] in ("ideal_cache_hit", "main_sessions_with_subagents")
            else _num(value)
        )
        rows.append([r["property"], r["target"], shown, "yes" if r["met"] else "NO"])
    _table(rows, out)
    out.write("\n")
    rows = [["distribution", "count", "p50", "p90", "p99", "mean"]]
    for key, label in _DISTS:
        d = stats[key]
        rows.append([label, str(d["count"])] + [_num(d[q]) for q in ("p50", "p90", "p99", "mean")])
    _table(rows, out)
    _think_table(stats, out)
    out.write(f"\nprefix-cache hit, token-weighted (block {stats['block_size']}):\n")
    rows = [["ideal (infinite cache)", f"{stats['ideal_cache_hit']:.2%}"]]
    if "lru_cache_hit" in stats:
        rows.append([f"LRU, {stats['cache_tokens']:,} tokens", f"{stats['lru_cache_hit']:.2%}"])
    width = max(len(r[0]) for r in rows)
    for label, value in rows:
        out.write(f"  {label.ljust(width)}  {value:>7}\n")
    _agent_table(stats, out)


def _pct(v) -> str:
    return "-" if v is None else f"{v:.2%}"


def _agent_table(stats: dict, out: TextIO) -> None:
    """Main sessions' and subagents' requests apart: their tokens and hits."""
    lru = "lru_cache_hit" in stats
    rows = [["by agent", "requests", "prompt tokens", "p50 prompt", "output tokens", "ideal hit"]]
    rows[0] += ["LRU hit"] if lru else []
    for agent, a in stats["by_agent"].items():
        row = [agent, f"{a['requests']:,}", _num(a["prompt_tokens"])]
        row += [_num(a["prompt_tokens_per_request"]["p50"]), _num(a["output_tokens"])]
        row += [_pct(a["ideal_cache_hit"])] + ([_pct(a["lru_cache_hit"])] if lru else [])
        rows.append(row)
    out.write("\n")
    _table(rows, out)


def render_fit(fitted: dict, drawn: dict, rows: list[dict], label: str, out: TextIO) -> None:
    """A fitted trace's figures beside those of a trace drawn from its profile."""
    table = [["fidelity (the fitted trace)", "fitted", label, "met"]]
    for r in rows:
        pct = r["key"] in ("ideal_cache_hit", "main_sessions_with_subagents")
        fmt = (lambda v: "-" if v is None else f"{v:.1%}") if pct else _num
        want = fitted[r["key"]]
        want = want["p50"] if isinstance(want, dict) else want
        table.append(
            [
                r["property"],
                f"{fmt(want)} {r['target'].split(' ', 1)[1]}",
                fmt(r["value"]),
                "yes" if r["met"] else "NO",
            ]
        )
    out.write("\n")
    _table(table, out)
