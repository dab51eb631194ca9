"""gate.md and the gate's terminal lines: the verdict, the evidence behind it, the runs left out."""

from __future__ import annotations

from pathlib import Path

GATE_MD = "gate.md"


def verdict_lines(doc: dict) -> list[str]:
    """The verdict in a few lines: what, on how many runs, what it could see, what it would need."""
    used, tried = doc["runs_used"], doc["runs_tried"]
    sides = (
        f"{used['a']} baseline and {used['b']} candidate runs"
        if doc["mode"] == "interleaved"
        else f"{used['b']} candidate runs against history"
    )
    lines = [
        f"verdict: {doc['verdict']} (exit {doc['exit_code']}), on {sides} "
        f"({sum(tried.values())} tried, {doc['minutes']:.1f} min, stopped: {doc['stopped_by']})"
    ]
    judgement = doc.get("judgement") or {}
    smallest = judgement.get("smallest_detectable") or {}
    if smallest:
        seen = ", ".join(f"{k} {_pct(v)}" for k, v in smallest.items())
        lines.append(f"smallest change this evidence could see: {seen}")
    if judgement.get("runs_needed"):
        lines.append(f"runs a side that would decide it: about {judgement['runs_needed']}")
    cal = doc.get("calibration")
    if cal:
        lines.append(calibration_line(cal))
    lines += [f"note: {n}" for n in doc["notes"] + list(judgement.get("notes") or [])]
    return lines


def calibration_line(cal: dict) -> str:
    rates = cal["rates"]
    fa = rates["false_alarm"]
    parts = [f"false alarms {fa['hits']} of {fa['n']} same-configuration comparisons"]
    for name, r in rates.items():
        if name.startswith("detect"):
            parts.append(f"{name.removeprefix('detect_')} slowdown caught {r['hits']} of {r['n']}")
    return f"this gate's calibration ({cal['runner']} runner, {cal['made']}): " + "; ".join(parts)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}" if abs(x) < 10 else f"{x:+.3g}"


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
