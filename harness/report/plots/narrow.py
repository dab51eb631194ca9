"""A wide figure laid out again at a narrow page's width (same point sizes, so its text is as
readable at 800 px as the wide one is at 1400 px); the title re-wrapped to the new width."""

from __future__ import annotations

from matplotlib.figure import Figure

from harness.report.plots.base import figure_title, legend_below

NARROW = 7.6  # inches at 100 dpi: the figure column of an 800 px page
WIDER_THAN = 8.0  # figures at least this wide get a narrow drawing too


def narrow_layout(fig: Figure) -> bool:
    """Resize a wide figure to NARROW in place (True), or leave a figure that fits (False)."""
    width, height = fig.get_size_inches()
    if width < WIDER_THAN:
        return False
    fig.set_size_inches(NARROW, height)
    for legend in list(fig.legends):  # legend_below's, its rows laid out again at this width
        labels = [t.get_text() for t in legend.get_texts()]
        handles = legend.legend_handles
        legend.remove()
        legend_below(fig, handles, labels)
    title = fig.get_suptitle()
    if title:
        figure_title(fig, " ".join(title.split()))
    return True
