"""The gate's stopping rule: when its runs so far decide, and at which level each look is judged.

`harness gate` and `harness gate --calibrate` share it, so the false-alarm rate the calibration
measures is the rate of the rule the gate applies. Runs are taken in pairs (one a side, or one
candidate run against history); a run whose host was busy, or that ended badly, is left out of
the evidence and counts against the budget. Interleaved pairs are judged paired (the within-pair
differences, harness/analysis/compare/noise.py `paired_spread`), so a pair counts only when both
its runs are usable. From `min_runs` such pairs (history mode: candidate runs) the verdict is
judged after every pair; the first `regressed` or `no change detected` ends it; otherwise it goes
on to `max_runs` a side and the last verdict stands (`inconclusive`, with the runs it would need).

Looking after every pair is a sequence of tests: each look at level `alpha` would let a
same-configuration pair fail more often than `alpha` overall. So the looks share `alpha`: half
of it is kept for the final look (the one at `max_runs`, where most of the evidence is), the other
half is spread evenly over the interim looks (at most `max_runs - min_runs` of them), and at each
look it is split again over the gated rows (Bonferroni over looks and rows). A regression is one
side of a row's interval: the interval is drawn two-sided at twice the row's share, so its lower
side is a one-sided test at the share, and the chance that any look calls a same-configuration
pair `regressed` on any gated row is at most `alpha` (and smaller: the change must also reach
its threshold). An early stop needs strong evidence; the final look keeps most of the power.
`harness gate --calibrate` measures the real rate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InputError

# TTFT p90 is reported but not gated by default: its between-run spread (one run's log SD 0.3-0.75
# on a shared 2-core host, docs/metrics.md "Gate") hides even +30 % at 10 pairs, so gating it could
# only turn detections of the other rows into `inconclusive`.
DEFAULT_FAIL_ON = "tpot_p50:+10%,tpgs:-5%"
DEFAULT_MIN_RUNS = 3
DEFAULT_MAX_RUNS = 10
Judge = Callable[..., Any]  # harness.analysis.compare.verdict.judge's shape


@dataclass(frozen=True)
class Rule:
    min_runs: int = DEFAULT_MIN_RUNS  # usable runs a side before the first look
    max_runs: int = DEFAULT_MAX_RUNS  # runs a side at most, busy and failed ones included
    alpha: float = 0.05  # the false-alarm rate the whole sequence of looks may spend
    fail_on: str = DEFAULT_FAIL_ON
    min_change: float | None = None  # None: the verdict's own default

    def __post_init__(self) -> None:
        if self.min_runs < 2:
            raise InputError(
                f"must be >= 2 (a spread needs two runs), got {self.min_runs}", field="--min-runs"
            )
        if self.max_runs < self.min_runs:
            raise InputError(
                f"must be >= --min-runs {self.min_runs}, got {self.max_runs}", field="--max-runs"
            )
        if not 0 < self.alpha < 1:
            raise InputError(f"must be between 0 and 1, got {self.alpha}", field="--alpha")

    @property
    def looks(self) -> int:
        return self.max_runs - self.min_runs + 1

    @property
    def rows(self) -> int:
        """The gated rows the level is split over (the `fail_on` thresholds)."""
        from harness.analysis.compare.changes import parse_fail_on

        return max(1, len(parse_fail_on(self.fail_on)))

    @property
    def alpha_final(self) -> float:
        """Each row's two-sided level at the final look: twice its one-sided share, half of
        alpha (all of it with one look) over the rows."""
        share = 1.0 if self.looks == 1 else 0.5
        return min(0.5, 2 * self.alpha * share / self.rows)

    @property
    def alpha_interim(self) -> float:
        """Each row's two-sided level at an interim look: the other half over the interim looks."""
        if self.looks == 1:
            return self.alpha_final
        return min(0.5, 2 * self.alpha * 0.5 / (self.looks - 1) / self.rows)

    @property
    def alpha_once(self) -> float:
        """Each row's two-sided level when the first look is the only one: tonight judged
        night against night (more runs tonight cannot narrow the spread between nights)."""
        return min(0.5, 2 * self.alpha / self.rows)

    def alpha_at(self, final: bool) -> float:
        return self.alpha_final if final else self.alpha_interim

    def to_json(self) -> dict:
        return {
            "min_runs": self.min_runs,
            "max_runs": self.max_runs,
            "alpha": self.alpha,
            "looks": self.looks,
            "rows": self.rows,
            "alpha_interim": self.alpha_interim,
            "alpha_final": self.alpha_final,
            "alpha_once": self.alpha_once,
            "fail_on": self.fail_on,
            "min_change": self.min_change,
        }


@dataclass
class Evidence:
    """The runs a gate has so far: every run tried, the usable ones a side, and the pairs (the
    i-th run of each side, run back to back) whose two runs are both usable."""

    baseline: list[Path] = field(default_factory=list)
    candidate: list[Path] = field(default_factory=list)
    tried: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    pairs: list[tuple[Path, Path]] = field(default_factory=list)
    _open: dict[str, Path | None] = field(default_factory=dict)

    def add(self, arm: str, path: Path, usable: bool) -> None:
        self.tried[arm] += 1
        if usable:
            (self.baseline if arm == "a" else self.candidate).append(path)
        self._open[arm] = path if usable else None
        if self.tried["a"] == self.tried["b"]:  # a pair is complete
            a, b = self._open.pop("a", None), self._open.pop("b", None)
            if a is not None and b is not None:
                self.pairs.append((a, b))


def judge_now(
    rule: Rule,
    evidence: Evidence,
    history: Sequence[Path],
    judge: Judge,
    *,
    paired: bool,
) -> Any | None:
    """The verdict of the usable runs so far, or None before the first look. Interleaved
    (`paired`): the pairs whose two runs are both usable, judged on their within-pair
    differences, from `min_runs` such pairs. Without a baseline side (history mode) the judge is
    given none: the screened history stands in (`RunJudge`); where the history is of other
    nights, tonight is judged night against night at `Rule.alpha_once`, and that first look
    ends the gate (`by_night`). The look is final when every run the rule allows has been
    tried."""
    final = spent(rule, evidence, paired=paired)
    kwargs: dict[str, Any] = {"fail_on": rule.fail_on, "alpha": rule.alpha_at(final)}
    if rule.min_change is not None:
        kwargs["min_change"] = rule.min_change
    if paired:
        if len(evidence.pairs) < rule.min_runs:
            return None
        base, cand = [a for a, _ in evidence.pairs], [b for _, b in evidence.pairs]
        return judge(base, cand, history=tuple(history), paired=True, **kwargs)
    if len(evidence.candidate) < rule.min_runs:
        return None
    kwargs["alpha_by_night"] = rule.alpha_once  # judged by night, this look is the only one
    return judge([], list(evidence.candidate), history=tuple(history), **kwargs)


class RunJudge:
    """The verdict module's judge over runs analyzed once each: a gate looks at the same runs
    again after every pair, and a calibration at the same runs in many windows. With no
    baseline runs, the history screened against the candidate (harness/analysis/compare/
    history.py) is the baseline, and the runs it left out are named in the notes; a history of
    none but other configurations is `not comparable`."""

    def __init__(self, screen: Any = None) -> None:
        self._analyses: dict[Path, Any] = {}
        self.screen = screen  # the gate's host screen (analysis.host_state.Screen), for history

    def analysis(self, path: Path) -> Any:
        from harness.analysis.loader import load_run
        from harness.analysis.summary import analyze

        key = Path(path).resolve()
        if key not in self._analyses:
            self._analyses[key] = analyze(load_run(key))
        return self._analyses[key]

    def __call__(self, baseline, candidate, *, history=(), paired=False, **kwargs) -> Any | None:
        from harness.analysis.compare import history as screening
        from harness.analysis.compare.verdict import judge_analyses, unlike_history

        cand = [self.analysis(p) for p in candidate]
        if baseline:
            past = [self.analysis(p) for p in history]
            return judge_analyses(
                [self.analysis(p) for p in baseline], cand, history=past, paired=paired, **kwargs
            )
        screened = screening.screen(
            [self.analysis(p) for p in history], cand, regressed_runs(history), as_baseline=True
        )
        if screened.all_unlike:
            return unlike_history(cand, screened)  # not comparable: no rerun makes it so
        if not screened.kept:
            return None
        judgement = judge_analyses(screened.kept, cand, **kwargs)
        judgement.notes += [f"history: {run} left out: {why}" for run, why in screened.left_out]
        return judgement


def regressed_runs(history: Sequence[Path]) -> set[str]:
    """The history's runs that their own gate judged regressed (its candidate runs, by the
    gate.json beside them): left out of later nights' history as the trend leaves them out, so
    a regression that stays is `regressed` every night, not once (kept, that night widened the
    spread between nights until the same slowdown read `inconclusive`)."""
    verdicts: dict[Path, set[str]] = {}
    for folder in {Path(p).parent for p in history}:
        try:
            doc = json.loads((folder / "gate.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # no gate made it, or its file is unreadable: nothing says it regressed
        if doc.get("verdict") == "regressed":
            runs = [r for r in doc.get("runs") or [] if r.get("arm") == "b"]
            verdicts[folder] = {Path(r.get("path", "")).name for r in runs}
    return {
        str(Path(p).resolve()) for p in history if Path(p).name in verdicts.get(Path(p).parent, ())
    }


def decisive(judgement: Any | None) -> bool:
    return judgement is not None and str(judgement.verdict) != "inconclusive"


def spent(rule: Rule, evidence: Evidence, *, paired: bool) -> bool:
    """Every run the rule allows a side has been tried."""
    sides = ("a", "b") if paired else ("b",)
    return all(evidence.tried[s] >= rule.max_runs for s in sides)
