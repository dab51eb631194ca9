"""`harness gate --calibrate`: the gate rule's false-alarm and detection rates, measured here.

Four arms of one scenario on the bundled engine: `a` and `a2` (the same configuration twice),
`s10` and `s30` (`target.engine.options.step_time_scale` 1.1 and 1.3: every engine step 10 % and
30 % longer). They run in cycles of one run each, an order and its reverse in turn (`cycle_order`),
so a host that drifts weighs on every arm alike and every two arms swap order from one cycle to
the next, as a gate's pairs do. A *comparison* is the gate's stopping rule
(harness/app/gate/rule.py) replayed on a window of consecutive cycles, exactly as `harness gate`
applies it live: pair after pair, busy runs left out, until decisive or `max_runs` a side.
Window j uses cycles j, j+1, ...: windows share runs (said in calibration.json `sharing`), and
each kind is judged both ways round (a vs a2 and a2 vs a; a vs s30 and a2 vs s30), so k windows
give 2k comparisons of a kind from k + max_runs - 1 cycles. An A/A comparison that says
`regressed` is a false alarm; a slowed one that says `regressed` is a detection. The host screen
is part of the rule: each recorded run's host state is judged again by the screen the calibration
is evaluated with (`--resume` on a finished calibration re-evaluates it under today's rule).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.analysis.detection_rates import host_summary, rate
from harness.analysis.host_state import Screen
from harness.app.gate.calibrations import calibration_key
from harness.app.gate.loop import CALIBRATION_FILE, GateRun, host_words, run_arm
from harness.app.gate.rule import Evidence, Judge, Rule, RunJudge, decisive, judge_now
from harness.app.scenario import Scenario
from harness.errors import InputError

ARMS = {"a": 1.0, "a2": 1.0, "s10": 1.1, "s30": 1.3}
ORDER = ("s10", "a", "a2", "s30")  # a cycle's runs; the next cycle's reversed
KINDS = {  # kind -> (baseline arm, candidate arm) of each comparison
    "false_alarm": (("a", "a2"), ("a2", "a")),
    "detect_+10%": (("a", "s10"), ("a2", "s10")),
    "detect_+30%": (("a", "s30"), ("a2", "s30")),
}
CYCLES_FILE = "cycles.json"


def arm_scenarios(scenario: Scenario) -> dict[str, Scenario]:
    if scenario.target.kind != "engine":
        raise InputError(
            "--calibrate slows the bundled engine: needs kind: engine", field="target.kind"
        )
    engine = scenario.target.engine
    return {
        name: scenario.model_copy(
            update={
                "target": scenario.target.model_copy(
                    update={
                        "engine": engine.model_copy(
                            update={"options": {**engine.options, "step_time_scale": scale}}
                        )
                    }
                )
            }
        )
        for name, scale in ARMS.items()
    }


def collect(
    scenario: Scenario, out: Path, cycles: int, screen: Screen, say: Callable[[str], None]
) -> list[dict[str, GateRun]]:
    """Run the cycles into out/c<i>-<arm>; cycles already on disk (a resumed calibration) are
    read back, not run again."""
    arms = arm_scenarios(scenario)
    done = _read_cycles(out)
    for i in range(len(done), cycles):
        order = cycle_order(i)
        cycle = {}
        for arm in order:
            shutil.rmtree(out / f"c{i + 1}-{arm}", ignore_errors=True)  # a cut-short cycle's
            run = run_arm(arms[arm], out / f"c{i + 1}-{arm}", arm, screen)
            say(
                f"calibrate: cycle {i + 1}/{cycles} {arm}: {run.status}, {host_words(run.host)}"
                + ("" if run.usable else f", left out ({run.why_not})")
            )
            if run.status == "interrupted":
                raise KeyboardInterrupt
            cycle[arm] = run
        done.append(cycle)
        _write_cycles(out, done)
    return done


def cycle_order(i: int) -> list[str]:
    """The arms of cycle `i`: `ORDER` and its reverse in turn, so every two arms swap order from
    one cycle to the next, as a gate's pairs do (a1 b1, b2 a2, ...), and in any window of cycles
    ran in each order as often, give or take one; `a` and `a2` sit in the middle both ways. A
    rotation put `a` before `a2` in three cycles of four; a torch A/A window whose `a` ran first
    in four of its five cycles was called regressed (5 pairs, each `a` 14-30 % slower)."""
    return list(ORDER) if i % 2 == 0 else list(reversed(ORDER))


def _write_cycles(out: Path, cycles: list[dict[str, GateRun]]) -> None:
    from dataclasses import asdict

    doc = [{arm: asdict(run) for arm, run in c.items()} for c in cycles]
    (out / CYCLES_FILE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _read_cycles(out: Path) -> list[dict[str, GateRun]]:
    path = out / CYCLES_FILE
    if not path.is_file():
        return []
    return [{arm: GateRun(**r) for arm, r in c.items()} for c in json.loads(path.read_text())]


def usable(run: GateRun, screen: Screen | None) -> bool:
    """A run that ended well and passes `screen` (None: as it was screened when it ran)."""
    if screen is None or run.status == "interrupted":
        return run.usable
    if run.why_not is not None and not run.why_not.startswith("host busy"):
        return False  # it ended badly or is invalid, whatever the host
    return not screen.rejudge(run.host).busy


def replay_rule(
    rule: Rule,
    window: list[dict[str, GateRun]],
    base: str,
    cand: str,
    judge: Judge,
    screen: Screen | None = None,
) -> dict:
    """The gate's rule on one window's cycles: as `harness gate` would have decided live."""
    evidence, judgement = Evidence(), None
    for cycle in window[: rule.max_runs]:
        for arm, side in ((base, "a"), (cand, "b")):
            run = cycle[arm]
            evidence.add(side, Path(run.path), usable(run, screen))
        judgement = judge_now(rule, evidence, (), judge, paired=True) or judgement
        if decisive(judgement):
            break
    verdict = "inconclusive" if judgement is None else str(judgement.verdict)
    return {
        "baseline": base,
        "candidate": cand,
        "cycles": [Path(c[base].path).name.split("-")[0] for c in window[: evidence.tried["a"]]],
        "runs_used": [len(evidence.pairs)] * 2,  # the pairs judged: both runs usable
        "verdict": verdict,
        "smallest_detectable": None if judgement is None else judgement.smallest_detectable,
    }


def evaluate(
    rule: Rule,
    cycles: list[dict[str, GateRun]],
    windows: int,
    judge: Judge,
    screen: Screen | None = None,
) -> dict:
    comparisons: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for j in range(windows):
        window = cycles[j : j + rule.max_runs]
        for kind, pairs in KINDS.items():
            comparisons[kind] += [replay_rule(rule, window, b, c, judge, screen) for b, c in pairs]
    return {"rates": {k: rate(v) for k, v in comparisons.items()}, "comparisons": comparisons}


def calibrate(
    scenario: Scenario,
    out: Path,
    *,
    rule: Rule,
    comparisons: int = 10,
    screen: Screen,
    say: Callable[[str], None] = print,
    judge: Judge | None = None,
) -> tuple[dict, Path]:
    t0 = time.perf_counter()
    n_cycles = comparisons + rule.max_runs - 1
    cycles = collect(scenario, out, n_cycles, screen, say)
    doc: dict[str, Any] = {
        "calibration_version": 2,
        "made": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "scenario": scenario.name,
        "runner": scenario.target.engine.options.get("runner", "torch"),
        "key": calibration_key(scenario, rule),
        "max_duration_s": scenario.load.max_duration,
        "rule": rule.to_json(),
        "screen": screen.to_json(),
        "host": host_summary([r.host for c in cycles for r in c.values()]),
        "cycles": n_cycles,
        "runs": 4 * n_cycles,
        "runs_left_out": sum(not usable(r, screen) for c in cycles for r in c.values()),
        "sharing": f"window j uses cycles j..j+{rule.max_runs - 1}; each kind judged both ways "
        "round: comparisons share runs",
        **evaluate(rule, cycles, comparisons, judge or RunJudge(), screen),
        "minutes": round((time.perf_counter() - t0) / 60, 1),
    }
    path = out / CALIBRATION_FILE
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return doc, path
