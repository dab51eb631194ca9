"""`harness gate`: runs until the verdict is decisive or the budget is spent; one verdict file.

Two modes. *Interleaved*: a baseline and a candidate configuration that can both run now are run
in pairs, the order alternating (a1 b1, b2 a2, a3 b3, ...) so a host that drifts slowly weighs on
both sides alike. *History*: one configuration (a nightly job against today's server) runs the
candidate alone, judged against earlier runs (`--history`), which the verdict screens. Every run is
an ordinary run folder (`DIR/a1`, `DIR/b1`, ...) with its summary.json; each is screened as it
ends: a run on a busy host (harness.analysis.host_state) or one that ended badly is kept on disk
but left out of the evidence, and run again while the budget lasts. The stopping rule is
harness/app/gate/rule.py's. `DIR/gate.json` holds the verdict, every run with its host state and
self-check, and the rule; `DIR/gate.md` says it in a few lines (harness/report/gate.py).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.host_state import Screen
from harness.app.gate.rule import Evidence, Judge, Rule, RunJudge, decisive, judge_now, spent
from harness.app.runs_progress import RunsProgress, interim_words
from harness.app.scenario import Scenario

if TYPE_CHECKING:
    from harness.export.metrics_server import MetricsServer

GATE_FILE = "gate.json"
GATE_VERSION = 1
CALIBRATION_FILE = "calibration.json"


@dataclass
class GateRun:
    arm: str  # "a" (baseline) or "b" (candidate)
    path: str
    wall_s: float
    status: str  # the run's RunStatus
    usable: bool
    why_not: str | None  # why it is left out of the evidence
    host: dict
    client_warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Budget:
    max_minutes: float | None = None  # no run starts once this much wall time is spent
    started: float = field(default_factory=time.perf_counter)

    def minutes(self) -> float:
        return (time.perf_counter() - self.started) / 60

    def allows(self, next_run_s: float) -> bool:
        if self.max_minutes is None:
            return True
        return self.minutes() + next_run_s / 60 <= self.max_minutes


@dataclass
class GateResult:
    verdict: str
    exit_code: int
    mode: str  # "interleaved" | "history"
    runs: list[GateRun]
    judgement: Any | None  # the verdict module's Judgement; None before the first look
    stopped_by: str  # "decisive" | "max runs" | "budget" | "interrupted" | "history recorded"
    # | "more nights needed" (judged by night and inconclusive: more runs tonight cannot decide)
    notes: list[str]
    rule: Rule
    minutes: float
    pairs_used: int | None = None  # interleaved: pairs whose two runs were both usable

    def to_json(self, calibration: dict | None, calibration_note: str | None = None) -> dict:
        return {
            "gate_version": GATE_VERSION,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "mode": self.mode,
            "stopped_by": self.stopped_by,
            "minutes": round(self.minutes, 2),
            "runs_used": {
                arm: sum(r.usable for r in self.runs if r.arm == arm) for arm in ("a", "b")
            },
            "pairs_used": self.pairs_used,
            "runs_tried": {arm: sum(r.arm == arm for r in self.runs) for arm in ("a", "b")},
            "rule": self.rule.to_json(),
            "notes": self.notes,
            "judgement": None if self.judgement is None else self.judgement.to_json(),
            "calibration": calibration,
            "calibration_note": calibration_note,  # why none is quoted
            "runs": [asdict(r) for r in self.runs],
        }


def gate(
    arms: dict[str, Scenario],
    out: Path,
    *,
    rule: Rule,
    history: Sequence[Path] = (),
    budget: Budget | None = None,
    screen: Screen | None = None,
    judge: Judge | None = None,
    say: Callable[[str], None] = print,
    run: Callable[..., GateRun] | None = None,
    bar: bool = False,
) -> GateResult:
    """Run `arms` ("a" and "b", or "b" alone with `history`) into `out` until decisive.
    `judge` and `run` default to the verdict module's judge and `run_arm`. History mode with no
    history (a nightly's first night) records `rule.min_runs` usable runs as the history and
    judges nothing. `bar`: a progress bar on stderr beside the lines `say` prints."""
    screen = screen or Screen()
    judge = judge or RunJudge(screen)  # history screened as the gate's own runs are
    run_one = run or run_arm
    budget = budget or Budget()
    paired = "a" in arms
    first = not paired and not history
    evidence, runs = Evidence(), list[GateRun]()
    judgement, stopped_by = None, "max runs"
    most = rule.max_runs * 2 if paired else rule.min_runs  # history: one look (rule.py)
    progress = RunsProgress("gate", most, budget.max_minutes, say, bar, started=budget.started)
    with progress:
        try:
            for arm in _schedule(paired):
                if spent(rule, evidence, paired=paired):
                    break
                if not budget.allows(_typical_s(runs)):
                    stopped_by = "budget"
                    break
                done = run_one(arms[arm], out / f"{arm}{evidence.tried[arm] + 1}", arm, screen)
                runs.append(done)
                evidence.add(arm, Path(done.path), done.usable)
                look, stop = _after(done, evidence, rule, history, judge, paired, first)
                judgement = look or judgement
                if not paired:
                    progress.most = _most_alone(rule, progress.most, done.usable, look, stop)
                progress.done(_run_line(done), done.wall_s, interim_words(look, _unit(paired)))
                if stop is not None:
                    stopped_by = stop
                    break
        except KeyboardInterrupt:
            stopped_by = "interrupted"
    result = _result(judgement, stopped_by, runs, rule, paired, budget)
    result.pairs_used = len(evidence.pairs) if paired else None
    if first:
        _recorded(result, rule)
    return result


def _after(done: GateRun, evidence, rule: Rule, history, judge, paired: bool, first: bool):
    """(the look this run allowed, or None; why to stop now, or None). A pair is judged whole;
    a first night only records."""
    if done.status == "interrupted":
        return None, "interrupted"
    if first:
        return None, "history recorded" if len(evidence.candidate) >= rule.min_runs else None
    if paired and evidence.tried["a"] != evidence.tried["b"]:
        return None, None
    look = judge_now(rule, evidence, history, judge, paired=paired)
    if decisive(look):
        return look, "decisive"
    return look, "more nights needed" if getattr(look, "by_night", False) else None


def _most_alone(rule: Rule, most: int | None, usable: bool, look, stop: str | None) -> int:
    """Runs a gate without a baseline side makes at most: `min_runs` usable ones to its one look
    (a first night records them), one more for each unusable run; the rule's most where a look
    ended nothing (no history left after screening: the gate goes on run by run)."""
    if look is not None and stop is None:
        return rule.max_runs
    most = rule.min_runs if most is None else most
    return most if usable else min(rule.max_runs, most + 1)


def _unit(paired: bool) -> str:
    return "pair(s)" if paired else "run(s)"


def _recorded(result: GateResult, rule: Rule) -> None:
    """A first night: its usable runs are the history; nothing was judged, nothing failed."""
    from harness.exit_codes import INCONCLUSIVE, OK

    usable = sum(r.usable for r in result.runs)
    result.notes = [n for n in result.notes if "no verdict could be judged" not in n]
    if usable and result.stopped_by != "interrupted":
        result.verdict, result.exit_code = "history recorded", OK
        fewer = (
            f" (fewer than {rule.min_runs}: a wider band tomorrow)"
            if usable < rule.min_runs
            else ""
        )
        result.notes.append(
            f"first run of this history: no earlier run matches --history, so nothing was judged; "
            f"its {usable} usable runs{fewer} are the history the next gate is judged against"
        )
    else:
        result.verdict, result.exit_code = "inconclusive", INCONCLUSIVE
        result.notes.append("first run of this history, and no usable run recorded: run it again")


def _schedule(paired: bool):
    """a b, b a, a b, ...: each pair's order alternates so a steady drift cancels."""
    n = 0
    while True:
        if not paired:
            yield "b"
        else:
            yield from ("a", "b") if n % 2 == 0 else ("b", "a")
        n += 1


def _typical_s(runs: list[GateRun]) -> float:
    return max((r.wall_s for r in runs), default=0.0)


def run_arm(
    scenario: Scenario, run_dir: Path, arm: str, screen: Screen, live: MetricsServer | None = None
) -> GateRun:
    """One run of `scenario` into `run_dir`, analyzed (summary.json) and screened; watched by
    `live` (the metrics endpoint) when given."""
    from harness.analysis.summary import analyze_run
    from harness.app.build import build_trace
    from harness.app.runner import replay_point
    from harness.exit_codes import OK, judge, measured_counts

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = build_trace(scenario)
        result = replay_point(  # named by its gate too: a history of many nights' `b1`s
            scenario, trace, run_dir, show_progress=False, live=live,
            run_id=f"{run_dir.parent.name}-{run_dir.name}",
        )  # fmt: skip
        summary = analyze_run(run_dir)
    wall = time.perf_counter() - t0
    host = screen.state(summary)
    code, ended = judge(str(result.status), *measured_counts(run_dir), 1.0)
    invalid = (summary.get("validity") or {}).get("reasons") or []
    why = (
        f"ended badly: {ended}"
        if code != OK
        else f"invalid: {invalid[0]}"
        if invalid
        else screen.why(summary)
    )
    return GateRun(
        arm,
        str(run_dir),
        round(wall, 2),
        str(result.status),
        why is None,
        why,
        host.to_json(),
        list((summary.get("client") or {}).get("warnings") or []),
        sorted({str(w.message) for w in caught}),
    )


def _run_line(run: GateRun) -> str:
    host = host_words(run.host)
    left = "" if run.usable else f", left out ({run.why_not})"
    return f"{Path(run.path).name}: {run.status} in {run.wall_s:.0f} s, {host}{left}"


def host_words(host: dict) -> str:
    """'waited for a CPU 31 % of the time, others' load 1.20/CPU'."""
    wait, load = host.get("wait_share"), host.get("others_load_per_cpu")
    words = [] if wait is None else [f"waited for a CPU {wait:.0%} of the time"]
    words += [] if load is None else [f"others' load {load:.2f}/CPU"]
    return ", ".join(words) or "host not sampled"


def _result(judgement, stopped_by: str, runs, rule: Rule, paired: bool, budget: Budget):
    from harness.exit_codes import INCONCLUSIVE

    notes = []
    busy = [r for r in runs if not r.usable]
    if busy:
        notes.append(
            f"{len(busy)} of {len(runs)} runs left out of the evidence: "
            + "; ".join(f"{Path(r.path).name} {r.why_not}" for r in busy)
        )
    if judgement is None:
        notes.append(
            (
                f"fewer than {rule.min_runs} pairs with both runs usable"
                if paired
                else f"fewer than {rule.min_runs} usable runs, or no usable history"
            )
            + ": no verdict could be judged"
        )
        verdict, code = "inconclusive", INCONCLUSIVE
    else:
        verdict, code = str(judgement.verdict), int(judgement.exit_code)
    if stopped_by == "interrupted":
        notes.append("interrupted: the verdict is of the runs that had ended")
    return GateResult(
        verdict,
        code,
        "interleaved" if paired else "history",
        runs,
        judgement,
        stopped_by,
        notes,
        rule,
        budget.minutes(),
    )


def write_gate(
    result: GateResult, out: Path, calibration: dict | None, calibration_note: str | None = None
) -> Path:
    from harness.report.gate import write_gate_markdown

    doc = result.to_json(calibration, calibration_note)
    path = out / GATE_FILE
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    write_gate_markdown(doc, out)
    return path
