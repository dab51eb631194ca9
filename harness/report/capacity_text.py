"""A capacity search in words: the band with each point's share of met runs, and the SLO that
binds at the first failing point, for the terminal and capacity.html alike."""

from __future__ import annotations

from harness.report.numbers import fmt

_NAMES = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2el": "E2EL",
    "e2el_per_token": "E2EL per token",
    "interactivity": "interactivity",
}


def slo_label(metric: str, percentile: float | None) -> str:
    name = _NAMES.get(metric, metric)
    return f"{name} p{percentile:g}" if percentile is not None else name


def value_text(metric: str, value: float | None) -> str:
    unit = " tok/s/user" if metric == "interactivity" else " s"
    return f"{fmt(value)}{unit}"


def band_sentence(result: dict) -> str:
    """'met at 60 in 3 of 3, 64 in 1 of 3 -> capacity 60, band 60-64'."""
    low, high = result["band"]
    points = {p["concurrency"]: p for p in result["points"]}
    shown = [
        c
        for c in sorted(points)
        if low <= c and (high is None or c <= high) and points[c]["decided_runs"]
    ]
    shares = ", ".join(
        f"{c} in {points[c]['met_runs']} of {points[c]['decided_runs']}" for c in shown
    )
    head = f"met at {shares} -> " if shares else "no point decided -> "
    if result.get("at_ceiling"):
        return (
            f"{head}at least {low}: every point up to the search's ceiling met; raise "
            f"--max-concurrency (now {result['ceiling']}) to search past it"
        )
    top = " and above (no miss tried above it)" if high is None else f"-{high}"
    return f"{head}capacity {low}, band {low}{top}"


def binding_sentence(result: dict) -> str:
    """'interactivity p90 19.3 tok/s/user against a bound of 20 at concurrency 64 (2 of 3 runs
    missed)'."""
    b = result.get("binding")
    if b is None:
        low, high = result["band"]
        raise_it = " (raise --max-concurrency to find the one that binds)"
        return f"no SLO bound: every SLO held at each point tried up to {low}" + (
            raise_it if result.get("at_ceiling") else ""
        )
    label = slo_label(b["metric"], b["percentile"])
    side = "at most" if b["upper"] else "at least"
    mean = "mean of its runs " if b["runs"] > 1 else ""
    spread = ""
    if b["interval"]:
        lo, hi = b["interval"]
        spread = f", 95 % t-interval {fmt(lo)}-{fmt(hi)}"
    return (
        f"{label} binds: {mean}{value_text(b['metric'], b['value'])}{spread} against a bound "
        f"of {side} {fmt(b['bound'])} at concurrency {b['concurrency']} "
        f"({b['missed_runs']} of {b['runs']} runs missed it)"
    )


def _screen(rule: dict) -> str:
    """The one host screen in words (harness/analysis/host_state.py): the wait share, where a run
    recorded one; other processes' load only for runs without it."""
    wait = rule.get("max_wait_share")
    load = f"other processes' load above {rule['busy_load']:g} per CPU"
    if wait is None:
        return load
    return f"its threads waited for a CPU more than {wait:.0%} of the time, or without that figure {load}"


def notes(result: dict) -> list[str]:
    """What the answer should be read with: non-monotone points, busy hosts, the budget."""
    lines = []
    for pair in result["non_monotone"]:
        what = "still after its re-run" if pair.get("after") else "not re-run (budget)"
        if not pair["persists"]:
            what = "not after the re-run"
        lines.append(f"not monotone: {pair['lower']} failed below {pair['higher']} met ({what})")
    busy = [p for p in result["points"] if p["busy_runs"]]
    if busy:
        lines.append(
            f"decided with runs on a busy host ({_screen(result['rule'])}): "
            + ", ".join(f"{p['concurrency']} ({p['busy_runs']})" for p in busy)
        )
    few = [p["concurrency"] for p in result["points"] if not p["decided_runs"]]
    if few:
        lines.append(
            f"undecided, fewer than {result['rule']['min_tasks']} tasks served in every run: "
            + ", ".join(map(str, few))
        )
    if result["budget"]["exhausted"]:
        lines.append(
            f"the budget ({fmt(result['budget']['budget_s'])} s) ran out: the band is wider"
        )
    return lines
