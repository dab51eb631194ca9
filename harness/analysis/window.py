"""The measured window: which span of a run the metrics describe, why, and what load it held.

Two ways to choose it (docs/metrics.md, "The measured window"):

- `phases`: the driver's phases (`--warmup`, `--warmup-requests`, `--cooldown`, mid-trajectory
  warm-up history): the window is the span of the requests marked `measure`.
- `steady`: warm-up ends by condition, not by the clock. The window is [t, end], with t the
  earliest time where the tasks in flight are at the target (within `tolerance`) from t to
  `end` (where they first drop below it), and the server-side hit rate of every `hold_s` chunk
  of [t, end] lies within `hit_tolerance` of the hit rate over all of [t, end] (optionally the
  TTFT p50 too, within a factor 1 + `ttft_tolerance`): the transient before t is cut off, the
  remainder is flat within the tolerance (warm-up truncation judged on what follows). The
  window spans at least 3 chunks.
  Requests sent outside it are re-marked `warmup` / `cooldown`. When no such t exists the
  driver's phases are kept and the summary says so.

Tasks in flight: a task (main session + subagents) is in flight from its first request's
`t_scheduled` to its last request's `t_done`; requests in flight: from `t_sent` to `t_done`.
Both are step functions of time; their time-weighted means over the window are reported beside
the target (`load.concurrency`, closed loop). The timeline (`summary.json` `timeline`) bins
both, and the rolling hit rate and TTFT p50, for the report's over-time view.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from harness.schema import ReplaySettings

MAX_BINS = 240
MIN_CHUNKS = 3  # a steady window spans at least this many hold_s chunks


@dataclass(frozen=True)
class SteadyRule:
    tolerance: float = 0.05  # tasks in flight >= (1 - tolerance) x target
    hit_tolerance: float = 0.02  # each chunk's hit rate within this of the window's (absolute)
    ttft_tolerance: float | None = None  # each chunk's TTFT p50 within a factor 1 + this; None: off
    hold_s: float | None = None  # chunk length; default max(5 s, 10 % of the run's span)


@dataclass
class Window:
    start: float
    end: float
    mode: str  # "phases" | "steady"
    stable: bool  # steady: the condition held; phases: always True
    reason: str


def task_spans(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of every task: first t_scheduled (else t_sent) to last t_done."""
    sent = records["t_sent"]
    start = records["t_scheduled"].fillna(sent)
    end = records["t_done"].fillna(sent)
    g = pd.DataFrame({"task": records["task"].to_numpy(), "start": start, "end": end}).groupby(
        "task"
    )
    return g["start"].min().to_numpy(dtype=float), g["end"].max().to_numpy(dtype=float)


def request_spans(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    sent = records["t_sent"].to_numpy(dtype=float)
    done = records["t_done"].to_numpy(dtype=float)
    keep = np.isfinite(sent)
    return sent[keep], np.where(np.isfinite(done), done, sent)[keep]


def level(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The step function 'how many spans are open': level[i] holds from times[i] to times[i+1]."""
    keep = np.isfinite(starts) & np.isfinite(ends)
    s, e = starts[keep], np.maximum(ends[keep], starts[keep])
    times = np.concatenate([s, e])
    steps = np.concatenate([np.ones(s.size), -np.ones(e.size)])
    order = np.lexsort((steps, times))  # at equal times, ends before starts
    return times[order], np.cumsum(steps[order])


def mean_level(times: np.ndarray, levels: np.ndarray, a: float, b: float) -> float | None:
    """Time-weighted mean of the step function over [a, b]."""
    if not b > a or times.size == 0:
        return None
    t = np.clip(times, a, b)
    widths = np.diff(np.append(t, b))
    return float((widths * levels).sum() / (b - a))


def binned_level(times: np.ndarray, levels: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.array(
        [mean_level(times, levels, a, b) or 0.0 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    )


class Signals:
    """Server hit rate and TTFT of the ok requests, by send time, for windows of any span."""

    def __init__(self, records: pd.DataFrame) -> None:
        ok = records[(records["status"] == "ok") & records["t_sent"].notna()].sort_values("t_sent")
        self.t = ok["t_sent"].to_numpy(dtype=float)
        self.cached = ok["cached_tokens"].to_numpy(dtype=float)
        prompt = ok["prompt_tokens"].to_numpy(dtype=float)
        self.prompt = np.where(
            np.isnan(prompt), ok["prompt_tokens_expected"].to_numpy(dtype=float), prompt
        )
        ideal = (
            ok["cached_tokens_ideal"]
            if "cached_tokens_ideal" in ok
            else pd.Series(np.nan, index=ok.index)
        )
        self.ideal = ideal.to_numpy(dtype=float)
        self.ttft = (ok["t_first_token"] - ok["t_sent"]).to_numpy(dtype=float)
        self.reported = bool(np.isfinite(self.cached).any())

    def _slice(self, a: float, b: float) -> slice:
        return slice(
            np.searchsorted(self.t, a, side="left"), np.searchsorted(self.t, b, side="left")
        )

    def hit_rate(self, a: float, b: float, ideal: bool = False) -> float | None:
        s = self._slice(a, b)
        hits, prompt = (self.ideal if ideal else self.cached)[s], self.prompt[s]
        known = np.isfinite(hits) & np.isfinite(prompt)
        total = prompt[known].sum()
        return float(hits[known].sum() / total) if total > 0 else None

    def ttft_p50(self, a: float, b: float) -> float | None:
        v = self.ttft[self._slice(a, b)]
        v = v[np.isfinite(v)]
        return float(np.median(v)) if v.size else None


def phase_window(records: pd.DataFrame) -> Window:
    m = records[(records["phase"] == "measure") & records["t_sent"].notna()]
    if m.empty:
        return Window(0.0, 0.0, "phases", True, "phases: no measured request")
    end = float(m["t_done"].fillna(m["t_sent"]).max())
    return Window(
        float(m["t_sent"].min()),
        end,
        "phases",
        True,
        "phases: the requests the driver marked measure",
    )


def steady_window(records: pd.DataFrame, target: int, rule: SteadyRule) -> Window:
    """The earliest start after which load and hit rate hold (see the module docstring). Load is
    judged per tenth of `hold_s` (time-weighted), so the instant between one task's end and the
    next one's first send does not count as a drop."""
    phases = phase_window(records)
    lo, hi = phases.start, phases.end
    hold = rule.hold_s or max(5.0, 0.1 * (hi - lo))
    need = (1 - rule.tolerance) * target
    edges = np.arange(lo, hi + 1e-9, hold / 10)
    if edges.size < 11:
        return _unstable(phases, f"the run is shorter than hold_s = {hold:.3g} s")
    loaded = binned_level(*level(*task_spans(records)), edges) >= need
    sig = Signals(records)
    first_why = ""  # why the earliest loaded start failed: the most telling reason
    for i in range(edges.size - 10):
        if not loaded[i : i + 10].all():
            continue
        drops = np.flatnonzero(~loaded[i:])
        end = float(edges[i + drops[0]]) if drops.size else hi
        why = _unsteady_because(sig, float(edges[i]), end, hold, rule)
        first_why = first_why or why
        if not why:
            reason = (
                f"steady: from {edges[i]:.3g} s, tasks in flight >= {need:.3g} and every"
                f" {hold:.3g} s chunk's hit rate within {rule.hit_tolerance} of the window's;"
                f" until {end:.3g} s (tasks still at target)"
            )
            return Window(float(edges[i]), end, "steady", True, reason)
    return _unstable(
        phases, f"never steady ({first_why or f'tasks in flight never held >= {need:.3g}'})"
    )


def _unstable(phases: Window, why: str) -> Window:
    return Window(phases.start, phases.end, "steady", False, f"{why}; kept the driver's phases")


def _chunks(a: float, b: float, hold: float) -> list[tuple[float, float]]:
    """[a, b] in chunks of `hold` (a shorter last piece joins the one before)."""
    n = max(1, int((b - a) // hold))
    cuts = [a + i * hold for i in range(n)] + [b]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _all(values: list[float | None]) -> list[float] | None:
    """The values, or None when any is missing."""
    present = [v for v in values if v is not None]
    return present if len(present) == len(values) else None


def _unsteady_because(sig: Signals, a: float, b: float, hold: float, rule: SteadyRule) -> str:
    if b - a < MIN_CHUNKS * hold:
        return f"load held for less than {MIN_CHUNKS} x {hold:.3g} s"
    spans = _chunks(a, b, hold)
    if sig.reported:
        whole, hits = sig.hit_rate(a, b), _all([sig.hit_rate(x, y) for x, y in spans])
        if whole is None or hits is None or max(abs(h - whole) for h in hits) > rule.hit_tolerance:
            return f"the hit rate of a {hold:.3g} s chunk was off by more than {rule.hit_tolerance}"
    if rule.ttft_tolerance is not None:
        whole, ttfts = sig.ttft_p50(a, b), _all([sig.ttft_p50(x, y) for x, y in spans])
        if (
            not whole
            or ttfts is None
            or max(max(t / whole, whole / t) for t in ttfts) > 1 + rule.ttft_tolerance
        ):
            return f"the TTFT p50 of a {hold:.3g} s chunk was off by more than x{1 + rule.ttft_tolerance:g}"
    return ""


def load_held(records: pd.DataFrame, window: Window, target: int | None) -> dict:
    """Time-weighted tasks and requests in flight over the window, beside the target."""
    tasks = mean_level(*level(*task_spans(records)), window.start, window.end)
    reqs = mean_level(*level(*request_spans(records)), window.start, window.end)
    held = tasks / target if tasks is not None and target else None
    return {
        "target_tasks": target,
        "tasks_in_flight_mean": tasks,
        "tasks_held": held,
        "requests_in_flight_mean": reqs,
    }


def timeline(records: pd.DataFrame, rolling_bins: int = 5) -> dict:
    """Binned over the whole run: tasks and requests in flight (time-weighted), and the hit rate
    (server and ideal) and TTFT p50 of the requests sent in the trailing `rolling_bins` bins."""
    sent = records["t_sent"].dropna()
    if sent.empty:
        return {
            "bin_s": None,
            "t": [],
            "tasks_in_flight": [],
            "requests_in_flight": [],
            "hit_rate": [],
            "ideal_hit_rate": [],
            "ttft_p50_s": [],
        }
    a, b = float(sent.min()), float(records["t_done"].max())
    width = max((b - a) / MAX_BINS, 0.5)
    edges = np.arange(a, b + width, width)
    sig = Signals(records)
    rolled = [(max(a, t - rolling_bins * width), t) for t in edges[1:]]
    return {
        "bin_s": width,
        "t": [float(t) for t in edges[1:]],
        "tasks_in_flight": binned_level(*level(*task_spans(records)), edges).tolist(),
        "requests_in_flight": binned_level(*level(*request_spans(records)), edges).tolist(),
        "hit_rate": [sig.hit_rate(x, y) for x, y in rolled],
        "ideal_hit_rate": [sig.hit_rate(x, y, ideal=True) for x, y in rolled],
        "ttft_p50_s": [sig.ttft_p50(x, y) for x, y in rolled],
    }


def choose_window(records: pd.DataFrame, mode: str, target: int | None, rule: SteadyRule) -> Window:
    if mode == "steady" and target:
        return steady_window(records, target, rule)
    return phase_window(records)


def apply_window(records: pd.DataFrame, window: Window) -> int:
    """Re-mark measured requests sent outside a steady window; returns how many moved."""
    if window.mode != "steady" or not window.stable:
        return 0
    t = records["t_sent"]
    measured = records["phase"] == "measure"
    before, after = measured & (t < window.start), measured & (t > window.end)
    records.loc[before, "phase"] = "warmup"
    records.loc[after, "phase"] = "cooldown"
    return int(before.sum() + after.sum())


def window_summary(window: Window, held: dict, rule: SteadyRule, moved: int) -> dict:
    return {
        "mode": window.mode,
        "start_s": window.start,
        "end_s": window.end,
        "stable": window.stable,
        "reason": window.reason,
        "requests_remarked": moved,
        "rule": asdict(rule),
        **held,
    }


def measure_window(
    records: pd.DataFrame,
    replay: ReplaySettings,
    mode: str | None = None,
    rule: SteadyRule | None = None,
) -> dict:
    """Choose the run's window (mode: the argument, else the manifest's `replay.window`, else
    `phases`), re-mark the `records` outside it (in place: the analyzer's own copy), and return
    summary.json's `window`. Call before anything reads the measured records."""
    mode = mode or replay.window or "phases"
    target = replay.concurrency if replay.load == "closed" else None
    rule = rule or SteadyRule()
    win = choose_window(records, mode, target, rule)
    moved = apply_window(records, win)
    return window_summary(win, load_held(records, win, target), rule, moved)


def warnings(summary: dict) -> list[str]:
    """What the terminal, summary.json and the report say about the window and the load held."""
    out = []
    if summary["mode"] == "steady" and not summary["stable"]:
        out.append(f"window: {summary['reason']}")
    held = summary["tasks_held"]
    if held is not None and abs(held - 1) > summary["rule"]["tolerance"]:
        out.append(
            f"load: {summary['tasks_in_flight_mean']:.3g} tasks in flight on average over the measured"
            f" window, not the target {summary['target_tasks']} ({held:.0%} held)"
        )
    return out
