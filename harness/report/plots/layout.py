"""Margins for a report figure, estimated from the text it holds, in place of constrained layout.

Constrained layout measures every tick label by laying the whole figure out once more before it
draws (an extra pass per PNG, about half a figure's cost: docs/metrics.md, "The report's cost").
The report's figures are few and alike (a wrapped title on top, tick labels and an axis label
left and below, maybe a legend under the axes), so their margins can be sized from character
counts at the figure's font sizes: the widest tick label, the title's lines, the legend's rows.
A label's width is the sum of its characters' advances in the figures' font, a little more.
"""

from __future__ import annotations

import math
import re
from functools import cache

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties

SAFETY = 1.06  # widths from the font's advances, a little more for kerning and hinting
LINE = 1.3  # a line's height, in ems
PAD = 5.0  # points between text and the axes, and at the figure's edge
SUPTITLE_Y = 0.98  # matplotlib's default height of a figure's title
_MATH = re.compile(r"\\mathdefault|[{}$]")


def fit(fig: Figure) -> None:
    """Set the figure's margins (and the space between its axes) for the text it now holds.
    Twice: an axes' size decides how many ticks it labels, so the margins the first pass
    gives can change its labels; the second keeps the wider of the two."""
    axes = [ax for ax in fig.axes if ax.get_visible()]
    if not axes:
        return
    fig.set_layout_engine(None)
    first = _margins(fig, axes)
    _adjust(fig, axes, first)
    _adjust(fig, axes, [max(a, b) for a, b in zip(first, _margins(fig, axes), strict=True)])


def _margins(fig: Figure, axes: list[Axes]) -> list[float]:
    """[left, right, top, bottom, between rows] in points."""
    top = _title(fig) + PAD + fig.get_figheight() * 72 * (1 - SUPTITLE_Y)
    bottom = max(_bottom(ax) for ax in axes) + _legends(fig) + PAD
    left = max(_left(ax) for ax in axes)
    return [left, _right(axes) + PAD, top, bottom, _between(axes)]


def _adjust(fig: Figure, axes: list[Axes], margins: list[float]) -> None:
    left, right, top, bottom, between = margins
    width, height = fig.get_figwidth() * 72, fig.get_figheight() * 72
    grid = axes[0].get_gridspec()
    rows, cols = grid.get_geometry() if grid is not None else (1, 1)
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        # the space between axes, in axes widths/heights: room for the next one's labels
        wspace=left * cols / max(width - left * cols, 1.0) if cols > 1 else 0.2,
        hspace=between * rows / max(height - top - bottom, 1.0) if rows > 1 else 0.2,
    )


def _size(text) -> float:
    return FontProperties(size=text.get_fontsize()).get_size_in_points()


def _width(label: str, size: float) -> float:
    return sum(_em(c) for c in _MATH.sub("", label)) * size * SAFETY


@cache
def _em(char: str) -> float:
    """A character's advance in the figures' font, in ems (read once per character)."""
    font = _font()
    font.set_size(100, 72)
    font.set_text(char)
    return font.get_width_height()[0] / 64 / 100


@cache
def _font():
    from matplotlib.font_manager import findfont, get_font

    return get_font(findfont(FontProperties()))


def _labels(axis) -> list[tuple[str, float, float]]:
    """(text, size in points, rotation) of the axis' tick labels in view, from its locator
    and formatter (what drawing will show) without making a tick for each."""
    if not axis.get_tick_params().get("labelleft", axis.get_tick_params().get("labelbottom", True)):
        return []
    lo, hi = sorted(axis.get_view_interval())
    texts = []
    for locator, formatter in (
        (axis.get_major_locator(), axis.get_major_formatter()),
        (axis.get_minor_locator(), axis.get_minor_formatter()),  # a short log axis labels some
    ):
        texts += formatter.format_ticks([x for x in locator() if lo <= x <= hi])
    first = axis.majorTicks[0].label1  # the labels' font, as set_ticks(..., fontsize=) left it
    size = FontProperties(size=first.get_fontsize()).get_size_in_points()
    return [(t, size, first.get_rotation()) for t in texts if t]


def _left(ax: Axes) -> float:
    """Points from the figure's left edge to the axes: tick labels, the axis label, pads."""
    widest = max((_width(text, size) for text, size, _ in _labels(ax.yaxis)), default=0.0)
    label = ax.yaxis.label
    label_h = _size(label) * LINE if label.get_text() else 0.0
    return widest + label_h + 3 * PAD


def _bottom(ax: Axes) -> float:
    """Points below the axes: x tick labels (rotated ones by their slant) and the axis label."""
    tall = 0.0
    for text, size, angle in _labels(ax.xaxis):
        slant = _width(text, size) * abs(math.sin(math.radians(angle)))
        tall = max(tall, size * LINE + slant)
    label = ax.xaxis.label
    return tall + (_size(label) * LINE if label.get_text() else 0.0) + 2 * PAD


def _right(axes: list[Axes]) -> float:
    """Half the last x tick label may stick out past the axes' right edge, and a note beside a
    point (an annotation) up to its whole width."""
    last = [_labels(ax.xaxis)[-1:] for ax in axes]
    tick = max((_width(t[0][0], t[0][1]) / 2 for t in last if t), default=0.0)
    notes = [t for ax in axes for t in ax.texts if t.get_text() and _offset(t)]
    return max([tick, *(_width(t.get_text(), _size(t)) for t in notes)])


def _offset(text) -> bool:
    """An annotation placed beside its point (in offset points), which may pass the edge."""
    return getattr(text, "_textcoords", None) == "offset points"


def _between(axes: list[Axes]) -> float:
    """Points between stacked axes: an upper one's x labels, if it shows any, and a gap."""
    return max(_bottom(ax) for ax in axes[:-1]) if len(axes) > 1 else 0.0


def _title(fig: Figure) -> float:
    title = fig.get_suptitle()
    if not title:
        return 0.0
    drawn = getattr(fig, "_suptitle", None)  # the Text of the title matplotlib keeps
    size = drawn.get_fontsize() if drawn is not None else 12.0
    return (title.count("\n") + 1) * size * LINE


def _legends(fig: Figure) -> float:
    """Points for the figure's legends under the axes (`plots.axes.legend_below`)."""
    total = 0.0
    for legend in fig.legends:
        n = len(legend.get_texts())
        cols = max(1, getattr(legend, "_ncols", 1))  # as given to fig.legend(ncol=...)
        size = _size(legend.get_texts()[0]) if n else 9.0
        total += -(-n // cols) * size * 1.6 + PAD
    return total
