"""What was tested, in words: the first lines of the terminal summary and the report's first block
(summary.json `tested`, harness.analysis.tested). One (label, text) pair per fact; a run
analyzed before `tested` existed gives none. The configuration comes first; the last rows
(`OUTCOMES`: how long it ran, how many tasks) are what the run did, so two runs of one
configuration differ there without being different tests."""

from __future__ import annotations

from markupsafe import Markup

from harness.analysis.summary_types import RunEnd, Sessions, Summary
from harness.report.jinja import render
from harness.report.numbers import fmt, share

LABELS = (
    "target",
    "model",
    "API",
    "sampling",
    "load",
    "token scale",
    "content",
    "device",
    "trace",
    "tasks",
    "duration",
)
OUTCOMES = ("tasks", "duration")


def tested_rows(summary: Summary) -> list[tuple[str, str]]:
    t = summary.get("tested")
    if not t:
        return []
    return list(
        zip(
            LABELS,
            (
                _target(t),
                t.get("model") or "-",
                _api(t),
                sampling_text(t.get("sampling")),
                load_text(t),
                _scale(t),
                content_text(t.get("content"), summary.get("speculative_decoding")),
                device_text(t),
                _trace(t),
                tasks_text(summary.get("sessions") or {}),
                _duration(t, summary),
            ),
            strict=True,
        )
    )


def _target(t: dict) -> str:
    served = f" ({t['served_by']})" if t.get("served_by") else ""
    if t.get("network"):  # a proxy, a CA bundle, --insecure: analysis/tested.py
        served += f" [{t['network']}]"
    named = t.get("scenario") not in (
        None,
        "replay",
    )  # `harness replay` names no scenario of its own
    scenario = f"; scenario {t['scenario']}" if named else ""
    return f"{t['target']}{served}{scenario}"


def _api(t: dict) -> str:
    api = t.get("api")
    if not api:
        return "-"
    if api == "completions":
        return f"completions ({'token ids' if t.get('prompt_format') == 'tokens' else 'text'})"
    return api


def sampling_text(sampling: dict | None) -> str:
    """'greedy (temperature 0)', 'temperature 0.7, top_p 0.9', or the server's default."""
    if sampling is None:
        return "not recorded (a run from before the harness set it: the server's default)"
    sent = sampling.get("sent") or {}
    if not sent:
        return "none sent: the server's default"
    greedy = "greedy, " if sent.get("temperature") == 0 else ""
    text = greedy + ", ".join(
        f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in sent.items()
    )
    unsent = sampling.get("not_carried") or []
    return text + (f" ({', '.join(unsent)}: no field in this API)" if unsent else "")


def content_text(content: dict | None, spec: dict | None) -> str:
    """'code, tool-shaped turns'; word lists under speculative decoding say what they do to it."""
    if not content:
        return "-"
    kind = {"code": "code (Python source)", "words": "words (English word lists)"}
    form = "tool-shaped turns" if content.get("turn_form") == "tools" else "plain turns"
    name = str(content.get("kind"))
    text = f"{kind.get(name, name)}, {form}"
    if content.get("kind") == "words" and spec:
        text += (
            "; WORDS UNDER SPECULATIVE DECODING: word lists are drafted and accepted far more "
            "than agent traffic (docs/speculative.md), so its acceptance and TPOT are not an "
            "agent's: use content: code"
        )
    return text


def load_text(t: dict) -> str:
    """'closed loop, concurrency 6, a 6-task trace cycled, 90 s limit': the load as configured."""
    load, tasks = t.get("load") or {}, (t.get("trace") or {}).get("tasks")
    mode = load.get("mode")
    head = f"{tasks} tasks, " if tasks else ""
    if mode == "closed":  # the concurrency is the load; the trace's size is only what it draws from
        text = f"closed loop, concurrency {load.get('concurrency') or '-'}"
        cycled = load.get("cycle_trace") and load.get("max_duration_s")
        if tasks:
            text += f", a {tasks}-task trace{' cycled' if cycled else ''}"
        elif cycled:
            text += ", trace cycled"
    elif mode == "open":
        text = f"{head}open loop, {fmt(load.get('session_rate'))} tasks/s ({load.get('arrival') or '-'})"
    elif mode == "timestamps":
        text = f"{head}at the trace's arrival times (time x{fmt(load.get('time_scale') or 1)})"
    elif mode == "requests":  # an imported tool's run: its own request-level load
        parts = [
            f"concurrency {load['concurrency']}" if load.get("concurrency") else "",
            f"{fmt(load['session_rate'])} req/s" if load.get("session_rate") else "",
        ]
        text = ", ".join(p for p in parts if p) or "as the tool ran it"
    else:
        text = head.rstrip(", ") or "-"
    limit = load.get("max_duration_s")
    return text + (f", {fmt(limit, 'g')} s limit" if limit else "")


def tasks_text(sessions: Sessions) -> str:
    """'19 ran, 13 complete': what the load achieved."""
    if not sessions.get("tasks"):
        return "-"
    done = sessions.get("tasks_complete_by_tool")
    done = sessions.get("tasks_complete", 0) if done is None else done
    return f"{sessions['tasks']} ran, {'unknown' if done is None else done} complete"


def _scale(t: dict) -> str:
    scale = t.get("token_scale")
    if scale is None:
        return "none given (token counts as the trace has them)"
    return f"x{fmt(scale, 'g')} (every token count of the workload scaled)"


def device_text(t: dict) -> str:
    d = t.get("device") or {}
    if not d.get("name"):
        if t.get("target", "").startswith("reference engine"):
            return "not recorded (a run from before the engine recorded its device)"
        return "not reported by the server (TPGS is per the GPU count given)"
    return f"{d['name']}; said by {d['source']}"


def _duration(t: dict, summary: Summary) -> str:
    w = summary.get("window") or {}
    span = w.get("end_s", 0) - w.get("start_s", 0) if w.get("end_s") is not None else None
    parts = [
        f"{fmt(t.get('duration_s'), '.3g')} s" if t.get("duration_s") is not None else "-",
        f"measured window {fmt(span, '.3g')} s" if span is not None else "",
        _stop(t, summary.get("run_end") or {}),
    ]
    return ", ".join(p for p in parts if p)


def _stop(t: dict, end: RunEnd) -> str:
    """How the run stopped, plainly: a limit the scenario set is an ending, not a fault."""
    ended, unsent = end.get("stopped_by"), end.get("unsent_requests") or 0
    limit = (t.get("load") or {}).get("max_duration_s")
    if ended == "max_duration" and limit:
        text = f"stopped at its {fmt(limit, 'g')} s limit (max_duration), as set"
    else:
        text = f"stopped by {ended.replace('_', ' ')}" if ended else ""
    return f"{text}; {unsent:,} of the trace's requests not sent" if text and unsent else text


def _trace(t: dict) -> str:
    tr = t.get("trace") or {}
    sha = (tr.get("sha256") or "")[:12]
    shape = (
        f"{tr['tasks']} tasks, {tr['sessions']} sessions" if tr.get("sessions") is not None else ""
    )
    parts = [tr.get("name") or "-", f"sha256 {sha}" if sha else "", shape]
    return " · ".join(p for p in parts if p)


def tested_html(summaries: list[tuple[str, Summary]]) -> Markup | str:
    """The report's first block: one column per run, a row per fact; configuration rows where
    runs differ are marked, since those are what a comparison is of; the outcome rows below
    them never are."""
    rows = [tested_rows(s) for _, s in summaries]
    if not any(rows):
        return ""
    if len(rows) == 1:  # one run: label and value pairs in a grid, two pairs a line when wide
        return render("tested.html", pairs=rows[0])
    width = max(len(r) for r in rows)
    rows = [r or [(label, "-") for label in LABELS][:width] for r in rows]
    table = []
    for i, label in enumerate(LABELS[:width]):
        values = [r[i][1] for r in rows]
        outcome = label in OUTCOMES  # runs of one configuration differ here: never marked
        table.append((label, values, not outcome and len(set(values)) > 1, outcome))
    return render("tested.html", pairs=None, names=[n for n, _ in summaries], rows=table)


def tpgs_caveat(s: Summary) -> str:
    """What TPGS is per: the device the server said it ran on, and the share that is cached
    prompt tokens (a cached token costs the server little: a high TPGS can be mostly cache)."""
    n = fmt(s["n_gpus"], "g")
    d = (s.get("tested") or {}).get("device") or {}
    name = d.get("name")
    if name and str(name).startswith("simulated"):
        where = f"of a {name.replace('simulated', 'simulated device', 1)}: modelled, not measured"
    elif name and d.get("gpu"):
        where = f"on {n} GPU ({name})"
    elif name:
        where = f"on {n} {str(name).upper()} (not a GPU)"
    else:
        given = {"argument": "--gpus", "manifest": "the scenario's gpus"}.get(
            s.get("n_gpus_source", ""), "the default"
        )
        engine = str((s.get("tested") or {}).get("target", "")).startswith("reference engine")
        who = "the run did not record" if engine else "the server did not say"
        where = f"per {n} GPU ({given}); {who} its device"
    cached = s["tpgs_parts"].get("cached")
    return f"TPGS {where}; {share(cached, s.get('tpgs'))} of it cached prompt tokens"
