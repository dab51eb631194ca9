"""gate.md and the gate's terminal lines: the verdict, the evidence behind it, the runs left out."""

from __future__ import annotations

from pathlib import Path

GATE_MD = "gate.md"


def verdict_lines(doc: dict) -> list[str]:
    """The verdict in a few lines: what, on how many runs, what it could see, what it would need."""
    used, tried = doc["runs_used"], doc["runs_tried"]
    sides = (
        f"{doc['pairs_used']} interleaved pairs (both runs usable)"
        if doc["mode"] == "interleaved" and doc.get("pairs_used") is not None
        else f"{used['a']} baseline and {used['b']} candidate runs"
        if doc["mode"] == "interleaved"
        else f"{used['b']} runs recorded as the history"
        if doc["verdict"] == "history recorded"
        else f"{used['b']} candidate runs against history"
    )
    lines = [
        f"verdict: {doc['verdict']} (exit {doc['exit_code']}), on {sides} "
        f"({sum(tried.values())} tried, {doc['minutes']:.1f} min, stopped: {doc['stopped_by']})"
    ]
    judgement = doc.get("judgement") or {}
    lines += [f"regressed: {failure}" for failure in judgement.get("failures") or []]
    for why in (judgement.get("why_not_comparable"), judgement.get("why_inconclusive")):
        if why:
            lines.append(f"{doc['verdict']}: {why}")
    smallest = judgement.get("smallest_detectable") or {}
    if smallest:
        seen = ", ".join(f"{k} {_pct(v)}" for k, v in smallest.items())
        lines.append(f"smallest change this evidence could see: {seen}")
    if judgement.get("runs_needed"):
        lines.append(f"about {judgement['runs_needed']} more runs a side would likely decide it")
    if judgement.get("nights_needed"):
        lines.append(f"about {judgement['nights_needed']} more night(s) would likely decide it")
    cal = doc.get("calibration")
    if cal:
        lines.append(calibration_line(cal))
    elif doc.get("calibration_note"):
        lines.append(f"calibration: {doc['calibration_note']}")
    lines += [f"note: {n}" for n in doc["notes"] + _said_once(judgement.get("notes") or [])]
    return lines


def _said_once(notes: list[str]) -> list[str]:
    """The verdict's notes, those it says of every run in one line each: a gate's runs all end
    by their duration, and on a shared host every self-check may blame it."""
    ended = [n for n in notes if "stopped by max_duration" in n]
    blamed = [n for n in notes if "self-check blamed the host" in n and not n.startswith("history")]
    out = [n for n in notes if n not in ended and n not in blamed]
    if blamed:
        runs = ", ".join(n.split(":", 1)[0] for n in blamed)
        out.append(
            f"the client self-check blamed the host in {len(blamed)} runs ({runs}); "
            "their figures follow the host as well as the server"
        )
    return out


def calibration_line(cal: dict) -> str:
    rates = cal["rates"]
    fa = rates["false_alarm"]
    parts = [f"false alarms {fa['hits']} of {fa['n']} same-configuration comparisons"]
    for name, r in rates.items():
        if name.startswith("detect"):
            parts.append(f"{name.removeprefix('detect_')} slowdown caught {r['hits']} of {r['n']}")
    whose = "the calibration of this gate's rule, runner, target and scenario"
    left = f", {cal['runs_left_out']} of {cal['runs']} runs left out as busy"
    return f"{whose} ({cal['runner']} runner, {cal['made']}{left}): " + "; ".join(parts)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"±{x:.0%}"


def write_gate_markdown(doc: dict, out: Path) -> Path:
    rows = [
        "| run | arm | status | others' load / CPU | used | why not |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in doc["runs"]:
        load = r["host"].get("others_load_per_cpu")
        rows.append(
            f"| {Path(r['path']).name} | {r['arm']} | {r['status']} | "
            f"{'n/a' if load is None else f'{load:.2f}'} | {'yes' if r['usable'] else 'no'} | "
            f"{r['why_not'] or ''} |"
        )
    text = "\n".join(
        ["# Gate", "", *(f"- {line}" for line in verdict_lines(doc)), "", "## Runs", "", *rows]
    )
    path = out / GATE_MD
    path.write_text(text + "\n", encoding="utf-8")
    return path
