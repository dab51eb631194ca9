"""Axes that follow the data: a log axis limited to the data's quantiles, the share it leaves out
said in the axis label (never a box over the data); tick labels with the decimals their step
needs (20.25k, 20.5k, 20.75k, not 20.2k, 20.5k, 20.8k), no offset, no e-notation; trend ranges
with a floor, so a change within noise does not look like a cliff."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib import ticker
from matplotlib.axes import Axes

from harness.report.numbers import human

TAIL = (0.01, 0.99)  # the share of requests an axis may leave out, each side
SPREAD = 5.0  # and it reaches at most this factor below p10 and above p90
TAIL_FACTOR = 2.0  # leave a tail out only when it reaches this far (x) past where the axis ends
TREND_FLOOR = 0.05  # a trend's y range spans at least ±5 % of its level


@dataclass(frozen=True)
class Span:
    """Where a log axis is drawn, and how many of the values lie beyond it on each side."""

    lo: float
    hi: float
    below: int
    above: int
    total: int

    def note(self, what: str = "requests") -> str:
        """'not drawn: 1.2 % of requests below, 0.1 % above'; '' when nothing is left out."""
        if not self.below and not self.above:
            return ""
        sides = [
            f"{_pct(self.below, self.total)} of {what} below" if self.below else "",
            f"{_pct(self.above, self.total)}{'' if self.below else f' of {what}'} above"
            if self.above
            else "",
        ]
        return "not drawn: " + ", ".join(s for s in sides if s)


def _pct(n: int, total: int) -> str:
    share = 100 * n / total
    return f"{share:.1f} %" if share >= 0.1 else f"{n:,}"


def log_span(
    values: np.ndarray, tail: tuple[float, float] = TAIL, keep: tuple[float, float] = (0.1, 0.9)
) -> Span | None:
    """The positive `values`' extent for a log axis, each end pulled in to its `tail` quantile,
    or to SPREAD times past p10 and p90 if that is nearer (a cluster of 1e-5 s TPOTs, a request
    whose tokens came in one read, is not where the data is), but never past the `keep`
    quantiles; an end moves only when the values reach more than TAIL_FACTOR past it."""
    v = values[np.isfinite(values) & (values > 0)]
    if not v.size:
        return None
    q = dict(zip((*tail, 0.1, 0.9, *keep), np.quantile(v, (*tail, 0.1, 0.9, *keep)), strict=True))
    lo = min(max(q[tail[0]], q[0.1] / SPREAD), q[keep[0]])
    hi = max(min(q[tail[1]], q[0.9] * SPREAD), q[keep[1]])
    lo = lo if v.min() < lo / TAIL_FACTOR else float(v.min())
    hi = hi if v.max() > hi * TAIL_FACTOR else float(v.max())
    return Span(float(lo), float(hi), int((v < lo).sum()), int((v > hi).sum()), int(v.size))


def log_x(ax: Axes, span: Span) -> None:
    """A log x axis over `span`; one of less than ~1.5 decades has at most one labelled power of
    ten, so its minor ticks at 2, 3 and 5 times a power are labelled too, in plain numbers."""
    ax.set_xscale("log")
    ax.set_xlim(span.lo / 1.15, span.hi * 1.15)
    # powers of ten in plain numbers (0.01, 0.1, 1), not 10^-2 in mathtext: easier to read
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: human(v, 1)))
    if span.hi / span.lo < 30:
        ax.xaxis.set_minor_locator(ticker.LogLocator(subs=(2.0, 3.0, 5.0)))
        ax.xaxis.set_minor_formatter(ticker.FuncFormatter(_minor_label))
    else:  # the style draws no tick marks: an unlabelled minor tick would only cost time
        ax.xaxis.set_minor_locator(ticker.NullLocator())


def _minor_label(value: float, _pos) -> str:
    mantissa = value / 10 ** np.floor(np.log10(value)) if value > 0 else 0.0
    return human(value, 1) if round(mantissa, 6) in (2.0, 3.0, 5.0) else ""


def label_with_note(ax: Axes, label: str, span: Span | None, what: str = "requests") -> None:
    """The x axis' label, and under it what the axis leaves out."""
    note = span.note(what) if span else ""
    ax.set_xlabel(f"{label}\n{note}" if note else label)


class StepFormatter(ticker.Formatter):
    """Tick labels with as many decimals as their step needs, in k or M past 10,000."""

    def __call__(self, x, pos=None) -> str:
        return human(x)

    def format_ticks(self, values) -> list[str]:
        values = list(values)
        steps = [abs(b - a) for a, b in zip(values, values[1:], strict=False) if b != a]
        if not steps:
            return [human(v) for v in values]
        biggest = max(abs(v) for v in values)
        scale, suffix = (1e6, "M") if biggest >= 1e6 else (1e3, "k") if biggest >= 1e4 else (1, "")
        places = _places(min(steps) / scale)
        return [_stepped(v / scale, places) + (suffix if v else "") for v in values]


def _places(step: float) -> int:
    """The fewest decimals that write `step` exactly (0.25 -> 2, 5 -> 0)."""
    return next((d for d in range(7) if abs(round(step, d) - step) <= step * 1e-6), 6)


def _stepped(x: float, places: int) -> str:
    text = f"{x:.{places}f}"
    return "0" if float(text) == 0 else text


def stepped_y(ax: Axes) -> None:
    ax.yaxis.set_major_formatter(StepFormatter())


def honest_ylim(ax: Axes, ys: list[float | None], floor: float = TREND_FLOOR) -> None:
    """A y range that spans at least ±`floor` of the values' level, so 0.967 → 0.966 reads as
    the 0.1 % it is; a range the data needs anyway is kept, with a margin; all zeros: 0 to 1."""
    v = np.asarray([y for y in ys if y is not None], dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return
    lo, hi = float(v.min()), float(v.max())
    if lo == hi == 0:
        ax.set_ylim(0, 1)
        return
    mid = (lo + hi) / 2
    half = max((hi - lo) / 2 * 1.25, abs(mid) * floor)
    bottom = 0.0 if lo >= 0 and mid - half < 0 else mid - half  # a count is never drawn below 0
    ax.set_ylim(bottom, mid + half)
