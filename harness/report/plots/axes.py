"""Axes that show where the data is: the extreme tail clipped with a marked note, trend ranges
with a floor so a change within noise does not look like a cliff, and legends laid out inside
the figure (constrained layout makes room for them; never cut at its edge)."""

from __future__ import annotations

import numpy as np

TAIL_Q = (0.001, 0.999)  # the share of requests an axis may leave out, each side
TAIL_FACTOR = 2.0  # clip only when the tail reaches this far (x) past the quantile
TREND_FLOOR = 0.05  # a trend's y range spans at least ±5 % of its level


def log_span(values: np.ndarray) -> tuple[float, float, int, int] | None:
    """(lo, hi, below, above) for a log axis over positive `values`: the 0.1 % / 99.9 %
    quantiles when the data reaches more than TAIL_FACTOR past them, else the data's extent."""
    v = values[np.isfinite(values) & (values > 0)]
    if not v.size:
        return None
    lo_q, hi_q = np.quantile(v, TAIL_Q)
    lo = lo_q if v.min() < lo_q / TAIL_FACTOR else v.min()
    hi = hi_q if v.max() > hi_q * TAIL_FACTOR else v.max()
    return float(lo), float(hi), int((v < lo).sum()), int((v > hi).sum())


def tail_note(ax, below: int, above: int, what: str = "requests") -> None:
    """The mark on an axis that leaves its extreme tail out: how many, on which side."""
    if not below and not above:
        return
    parts = [f"◀ {below:,} {what} below" if below else "", f"{above:,} above ▶" if above else ""]
    text = "axis clipped at p0.1 / p99.9: " + ", ".join(p for p in parts if p)
    ax.text(
        0.99, 0.02, text, transform=ax.transAxes, ha="right", va="bottom", fontsize="x-small",
        color="#555", bbox={"facecolor": "white", "edgecolor": "#bbb", "boxstyle": "round,pad=0.2"},
    )  # fmt: skip


def clip_log_x(ax, values: np.ndarray, what: str = "requests") -> None:
    """Limit a log x axis to where the data is, and say what it leaves out."""
    span = log_span(values)
    if span is None:
        return
    lo, hi, below, above = span
    ax.set_xlim(lo / 1.15, hi * 1.15)
    tail_note(ax, below, above, what)


def honest_ylim(ax, ys: list[float | None], floor: float = TREND_FLOOR) -> None:
    """A y range that spans at least ±`floor` of the values' level, so 0.967 → 0.966 reads as
    the 0.1 % it is; a range the data needs anyway is kept, with a margin."""
    v = np.asarray([y for y in ys if y is not None], dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return
    lo, hi = float(v.min()), float(v.max())
    mid = (lo + hi) / 2
    half = max((hi - lo) / 2 * 1.25, abs(mid) * floor, 1e-12)
    bottom = mid - half
    if lo >= 0 and bottom < 0:  # a quantity that cannot go below 0 is not drawn below it
        bottom = 0.0
    ax.set_ylim(bottom, mid + half)


def legend_below(fig, handles: list, labels: list[str]) -> None:
    """A legend under the axes, as many columns as fit the figure's width, inside the figure."""
    if not handles:
        return
    size_pt = 9.0  # "small" at the notebook context's 11 pt
    widest = max(len(label) for label in labels) * size_pt * 0.58 + 32  # text + handle + gap
    ncol = max(1, min(len(labels), int(fig.get_figwidth() * 72 * 0.96 // widest)))
    fig.legend(
        handles, labels, loc="outside lower center", ncol=ncol, fontsize=size_pt, frameon=False
    )
