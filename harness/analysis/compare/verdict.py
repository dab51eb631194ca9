"""The verdict of a comparison across runs: regressed (exit 1), no change detected (0), inconclusive
(4), not comparable (5).

`judge` loads the baseline, candidate and history runs, screens the history and each side's own
runs (`history.py`: busy hosts, bad endings, outliers), judges each headline metric
(`changes.row`) and draws one verdict over the gated rows (the `--fail-on` metrics, else every
row at `--min-change`): `regressed` when any gated row regressed (or a gated run is invalid),
else `not comparable` when any gated row cannot be judged (another trace, another load, a trace
or load unknown, a figure the sides define otherwise or only one measures), else `inconclusive`
when any is (or a side has no usable run left), else `no change detected`. So a changed load
never passes green. An inconclusive verdict says how many more runs a side would likely decide
it; a `no change detected` one, per gated metric, the smallest change this evidence could have
seen.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.analysis.compare import evidence, nights, notes
from harness.analysis.compare import history as screening
from harness.analysis.compare.changes import (
    INCONCLUSIVE,
    NO_CHANGE,
    REGRESSED,
    MetricChange,
    Threshold,
    default_threshold,
    figures,
    parse_fail_on,
    row,
)
from harness.analysis.compare.comparable import not_comparable
from harness.analysis.compare.sides import HEADLINE, Side
from harness.analysis.loader import load_runs
from harness.analysis.summary import Analysis, analyze
from harness.exit_codes import FAILED_GATE, NOT_COMPARABLE, OK
from harness.exit_codes import INCONCLUSIVE as EXIT_INCONCLUSIVE

ALPHA = 0.05  # 95 % intervals: with a handful of runs a side, 99 % could never decide
MIN_CHANGE = 0.02


class Verdict(enum.StrEnum):
    REGRESSED = REGRESSED
    NO_CHANGE = NO_CHANGE
    INCONCLUSIVE = INCONCLUSIVE
    NOT_COMPARABLE = "not comparable"

    @property
    def exit_code(self) -> int:
        return _EXIT[self]


_EXIT = {
    Verdict.REGRESSED: FAILED_GATE,
    Verdict.NO_CHANGE: OK,
    Verdict.INCONCLUSIVE: EXIT_INCONCLUSIVE,
    Verdict.NOT_COMPARABLE: NOT_COMPARABLE,
}


@dataclass
class Judgement:
    verdict: Verdict
    rows: list[MetricChange]
    runs_needed: int | None  # inconclusive: more runs a side that would likely decide it
    smallest_detectable: dict[str, float]  # gated metric -> smallest relative change visible
    notes: list[str]  # reasons said once: not comparable, history left out, imports, endings
    baseline: list[str] = field(default_factory=list)
    run: list[str] = field(default_factory=list)
    counts: dict = field(default_factory=dict)  # side -> {"ok": n, "failed": n}
    thresholds: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)  # the history runs used
    left_out: list[tuple[str, str]] = field(default_factory=list)  # history runs, and why not
    alpha: float = ALPHA
    min_change: float = MIN_CHANGE
    shared_why_not: str | None = None  # a reason no row is comparable, said once
    paired: bool = False  # judged on within-pair differences (baseline[i], run[i] back to back)
    why_not_comparable: str | None = None  # not comparable: which gated rows, and why
    why_inconclusive: str | None = None  # inconclusive for want of usable runs, not of evidence
    by_night: bool = False  # judged night against night (nights.py): more nights decide, not runs
    nights_needed: int | None = (
        None  # inconclusive by night: more earlier nights likely deciding it
    )

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def to_json(self) -> dict:
        out = asdict(self)
        out["verdict"] = str(self.verdict)
        out["exit_code"] = self.exit_code
        out["left_out"] = [{"run": r, "why": w} for r, w in self.left_out]
        return out

    to_dict = to_json


CompareResult = Judgement  # the name the report and the notebooks import


def judge(
    baseline: Sequence[str | Path],
    candidate: Sequence[str | Path],
    *,
    history: Sequence[str | Path] = (),
    fail_on: str | None = None,
    alpha: float = ALPHA,
    min_change: float = MIN_CHANGE,
    allow_unclosed: bool = False,
) -> Judgement:
    """Run folders (or globs) in, one verdict out; the two sides are never their own history,
    and each side's runs are screened as the history is."""
    base = [analyze(r) for r in load_runs(list(map(str, baseline)))]
    cand = [analyze(r) for r in load_runs(list(map(str, candidate)))]
    sides = {str(a.run.path.resolve()) for a in [*base, *cand]}
    past = [
        analyze(r)
        for r in load_runs(list(map(str, history))) if history
        if str(r.path.resolve()) not in sides
    ]  # fmt: skip
    return judge_analyses(
        base, cand, history=past, fail_on=fail_on, alpha=alpha, min_change=min_change,
        allow_unclosed=allow_unclosed, screen_sides=True,
    )  # fmt: skip


def judge_analyses(
    baseline: list[Analysis],
    candidate: list[Analysis],
    *,
    history: Iterable[Analysis] = (),
    fail_on: str | None = None,
    alpha: float = ALPHA,
    min_change: float = MIN_CHANGE,
    allow_unclosed: bool = False,
    flagged: Iterable[str] = (),
    gate_keys: Iterable[str] | None = None,
    paired: bool = False,
    screen_sides: bool = False,
    alpha_by_night: float | None = None,
) -> Judgement:
    """`judge` on runs already analyzed. `flagged`: history run paths already judged regressed;
    `gate_keys`: the rows the verdict covers when no `fail_on` names them (default: all).
    A gate (`fail_on`) refuses a run that was not closed or failed, unless `allow_unclosed`.
    `paired`: baseline[i] and candidate[i] ran back to back (an interleaved gate's pairs); each
    row is judged on the within-pair differences (`noise.paired_spread`), and history is not
    used: the pairs' own differences are the noise. `screen_sides`: each side's runs are
    screened like the history (`history.screen_side`; a gate screens its runs as they end).
    Where the candidate's runs are of other nights than the rest (`nights.apart`), each row is
    judged night against night, at `alpha_by_night` when given (a gate's single look)."""
    thresholds = {t.key: t for t in parse_fail_on(fail_on)}
    if thresholds and not allow_unclosed:
        notes.refuse_unclosed([*baseline, *candidate])
    past_runs = list(history)
    if paired and len(baseline) != len(candidate):
        raise ValueError(f"paired runs need as many a side: {len(baseline)} vs {len(candidate)}")
    rng = evidence.rng()
    gated = set(thresholds) or set(gate_keys or (m.key for m in HEADLINE))
    sides = screening.Sides(baseline, candidate)
    if screen_sides and not paired:
        sides = screening.screen_sides(baseline, candidate, gated, rng, ended=not allow_unclosed)
    baseline, candidate = sides.baseline, sides.candidate
    screened = screening.screen([] if paired else past_runs, baseline, flagged)
    why_not = not_comparable(baseline, candidate)
    gates = {m.key: thresholds.get(m.key) or default_threshold(m, min_change) for m in HEADLINE}
    base, cand = _figures(baseline, candidate, rng, paired)
    kept = screening.drop_outliers(screened, base, gated)
    by_night = not paired and nights.apart(
        [nights.night_of(a) for a in baseline],
        [nights.night_of(a) for a in candidate],
        [nights.night_of(a) for a in kept],
    )
    alpha = alpha_by_night if by_night and alpha_by_night is not None else alpha
    rows = []
    for m in HEADLINE:
        past = [(v, nights.night_of(a)) for a in kept if (v := m.value(Side([a]))) is not None]
        r = row(
            m, base[m.key], cand[m.key], [v for v, _ in past], gates[m.key], alpha, min_change,
            why_not.get(m.key), paired=paired,
            history_nights=[n for _, n in past] if by_night else None,
        )  # fmt: skip
        r.gated = m.key in gated
        rows.append(r)
    rows = notes.measured(rows)
    out = _verdict(rows, baseline, candidate, screened, thresholds, alpha, min_change)
    out.paired, out.by_night = paired, by_night
    if by_night:
        _night_notes(out)
    _side_notes(out, sides)
    if paired and past_runs:
        out.notes.append(
            f"paired over {len(baseline)} pairs: the {len(past_runs)} history runs were not "
            "used (the pairs' own differences are the noise)"
        )
    return out


def _figures(baseline: list[Analysis], candidate: list[Analysis], rng, paired: bool):
    """Each metric's figures a side (paired: of the pairs whose two runs both measure it)."""
    if paired:
        both = {m.key: _both_measured(m, baseline, candidate) for m in HEADLINE}
        base = {m.key: figures(m, [a for a, _ in both[m.key]], rng) for m in HEADLINE}
        cand = {m.key: figures(m, [b for _, b in both[m.key]], rng) for m in HEADLINE}
        return base, cand
    base = {m.key: figures(m, baseline, rng) for m in HEADLINE}
    cand = {m.key: figures(m, candidate, rng) for m in HEADLINE}
    return base, cand


def _night_notes(out: Judgement) -> None:
    """Say that the night was the unit, how many more nights would likely decide it, and with
    one night a side why nothing is decided yet."""
    band = next((r.band_source for r in out.rows if r.gated and r.band_source), None)
    out.notes.append(
        f"judged night against night, {band}: a night's runs share its host and server state, "
        "so their spread is not the spread between nights"
    )
    if out.verdict == Verdict.INCONCLUSIVE:
        out.nights_needed = _needed([r for r in out.rows if r.gated], "nights_needed")
    if out.verdict == Verdict.INCONCLUSIVE and any(
        r.gated and r.band is None and r.verdict is not None for r in out.rows
    ):
        out.why_inconclusive = (
            "one earlier night: how much nights differ is not known yet, so no change can be "
            "told from a night's own spread; from the third night on, nights are judged"
        )


def _side_notes(out: Judgement, sides: screening.Sides) -> None:
    """The side runs the screen left out, and an inconclusive verdict for a side left empty."""
    for name, left in sides.left_out.items():
        out.left_out += [(run, why) for run, why in left]
        out.notes += [f"{name}: {run} left out: {why}" for run, why in left]
    if sides.empty is not None and out.verdict != Verdict.NOT_COMPARABLE:
        _no_usable_run(out, sides.empty)


def _no_usable_run(out: Judgement, side: str) -> None:
    """A side with no usable run decides nothing: inconclusive, whatever its rows show."""
    out.verdict = Verdict.INCONCLUSIVE
    out.failures, out.runs_needed, out.smallest_detectable = [], None, {}
    out.why_inconclusive = (
        f"the {side} side has no usable run (each left out, listed above): rerun it on a quiet host"
    )
    for r in out.rows:
        if r.verdict is not None:
            r.verdict, r.heading, r.runs_needed = INCONCLUSIVE, None, None


def _both_measured(m, baseline: list[Analysis], candidate: list[Analysis]) -> list:
    """The pairs whose two runs both measure `m`: a pair is judged whole or not at all."""
    return [
        (a, b)
        for a, b in zip(baseline, candidate, strict=True)
        if m.value(Side([a])) is not None and m.value(Side([b])) is not None
    ]


def _verdict(
    rows: list[MetricChange],
    baseline: list[Analysis],
    candidate: list[Analysis],
    screened: screening.Screened,
    thresholds: dict[str, Threshold],
    alpha: float,
    min_change: float,
) -> Judgement:
    judged = [r for r in rows if r.gated and r.verdict is not None]
    failures = [notes.failure_line(r) for r in judged if r.verdict == REGRESSED]
    invalid = notes.invalid_notes([*baseline, *candidate])
    if thresholds:
        failures += invalid
    why = {r.why_not for r in rows}
    shared = next(iter(why)) if len(why) == 1 and None not in why else None
    unjudged = _unjudged(rows, thresholds, shared)
    verdict = Verdict.NO_CHANGE
    if failures:
        verdict = Verdict.REGRESSED
    elif unjudged:
        verdict = Verdict.NOT_COMPARABLE
    elif any(r.verdict == INCONCLUSIVE for r in judged):
        verdict = Verdict.INCONCLUSIVE
    base, cand = Side(baseline), Side(candidate)
    return Judgement(
        verdict=verdict,
        rows=rows,
        runs_needed=_runs_needed(judged) if verdict == Verdict.INCONCLUSIVE else None,
        smallest_detectable={
            r.key: r.smallest_detectable for r in judged if r.smallest_detectable is not None
        },
        notes=notes.run_notes(baseline, candidate, screened, rows, shared) + invalid,
        baseline=base.names,
        run=cand.names,
        counts={"baseline": base.counts(), "run": cand.counts()},
        thresholds=[str(t) for t in thresholds.values()],
        failures=failures,
        history=[a.run.name for a in screened.kept],
        left_out=list(screened.left_out),
        alpha=alpha,
        min_change=min_change,
        shared_why_not=shared,
        why_not_comparable=unjudged,
    )


def _unjudged(rows: list[MetricChange], thresholds: dict, shared: str | None) -> str | None:
    """Why gated rows could not be judged, in one line (None: every gated row was): the reason
    shared by every row, else each reason with the rows it holds for; a `--fail-on` metric
    neither side measured counts too."""
    if shared is not None:
        return shared
    by_reason: dict[str, list[str]] = {}
    for r in rows:
        if r.gated and r.why_not is not None:
            by_reason.setdefault(r.why_not, []).append(r.key)
    shown = {r.key for r in rows}
    missing = [k for k in thresholds if k not in shown]
    if missing:
        by_reason.setdefault("measured on neither side", []).extend(missing)
    return "; ".join(f"{', '.join(keys)}: {why}" for why, keys in by_reason.items()) or None


def unlike_history(candidate: list[Analysis], screened: screening.Screened) -> Judgement:
    """The verdict of runs judged against a history none of whose runs is of their configuration
    (`Screened.all_unlike`): not comparable, naming how the latest history run differs."""
    latest, why = screened.unlike[-1]
    others = len(screened.unlike) - 1
    more = f" (and {others} earlier run{'s' * (others > 1)} alike)" if others else ""
    cand = Side(candidate)
    return Judgement(
        verdict=Verdict.NOT_COMPARABLE,
        rows=[],
        runs_needed=None,
        smallest_detectable={},
        notes=[f"history: {run} left out: {w}" for run, w in screened.left_out],
        run=cand.names,
        counts={"baseline": {"ok": 0, "failed": 0}, "run": cand.counts()},
        left_out=list(screened.left_out),
        why_not_comparable=f"no history run is of this configuration; {latest}{more}: {why}",
    )


def _runs_needed(judged: list[MetricChange]) -> int | None:
    return _needed(judged, "runs_needed")


def _needed(judged: list[MetricChange], field: str) -> int | None:
    """The fewest more runs (or nights: `field`) that would likely show a regression where one
    looms; else the most any inconclusive row needs to be ruled out (None: more than
    `noise.MAX_MORE_RUNS`)."""
    open_rows = [r for r in judged if r.verdict == INCONCLUSIVE]
    looming = [n for r in open_rows if r.heading == REGRESSED and (n := getattr(r, field))]
    if looming:
        return min(looming)
    needed = [getattr(r, field) for r in open_rows]
    return None if not needed or None in needed else max(n for n in needed if n is not None)


def compare_runs(
    baseline_dirs, run_dirs, fail_on=None, alpha=ALPHA, min_change=MIN_CHANGE,
    history_dirs=None, allow_unclosed=False,
) -> Judgement:  # fmt: skip
    """`judge` under the name its first callers used."""
    return judge(
        _as_list(baseline_dirs), _as_list(run_dirs), history=_as_list(history_dirs or []),
        fail_on=fail_on, alpha=alpha, min_change=min_change, allow_unclosed=allow_unclosed,
    )  # fmt: skip


def compare_analyses(
    baseline, run, fail_on=None, alpha=ALPHA, min_change=MIN_CHANGE, history=None,
    allow_unclosed=False,
) -> Judgement:  # fmt: skip
    """`judge_analyses` as `harness compare` applies it (each side screened), for notebooks."""
    return judge_analyses(
        baseline, run, history=history or [], fail_on=fail_on, alpha=alpha,
        min_change=min_change, allow_unclosed=allow_unclosed, screen_sides=True,
    )  # fmt: skip


def _as_list(dirs) -> list:
    return [dirs] if isinstance(dirs, str | Path) or not hasattr(dirs, "__iter__") else list(dirs)
