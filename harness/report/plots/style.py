"""The figures' look: seaborn's "whitegrid" style at its "notebook" scale and its "deep" palette,
written out as matplotlib settings, so drawing a report imports neither seaborn (whose import
pulls in scipy.stats, more time than all the figures' drawing) nor pyplot (figures are plain
`matplotlib.figure.Figure` objects, drawn by the Agg canvas that `savefig` picks)."""

from __future__ import annotations

from typing import Any

import matplotlib
from cycler import cycler

from harness.report.colors import RUNS

WHITEGRID: dict[str, Any] = {
    "axes.axisbelow": True,
    "axes.edgecolor": ".8",
    "axes.grid": True,
    "axes.labelcolor": ".15",
    "axes.labelsize": 12.0,
    "axes.linewidth": 1.25,
    "axes.prop_cycle": cycler("color", RUNS),
    "axes.titlesize": 12.0,
    "font.sans-serif": [
        "Arial",
        "DejaVu Sans",
        "Liberation Sans",
        "Bitstream Vera Sans",
        "sans-serif",
    ],
    "font.size": 12.0,
    "grid.color": ".8",
    "grid.linewidth": 1.0,
    "legend.fontsize": 11.0,
    "legend.title_fontsize": 12.0,
    "lines.solid_capstyle": "round",
    "patch.edgecolor": "w",
    "patch.force_edgecolor": True,
    "text.color": ".15",
    "xtick.bottom": False,
    "xtick.color": ".15",
    "xtick.labelsize": 11.0,
    "xtick.major.size": 6.0,
    "xtick.major.width": 1.25,
    "xtick.minor.size": 4.0,
    "xtick.minor.width": 1.0,
    "ytick.color": ".15",
    "ytick.labelsize": 11.0,
    "ytick.left": False,
    "ytick.major.size": 6.0,
    "ytick.major.width": 1.25,
    "ytick.minor.size": 4.0,
    "ytick.minor.width": 1.0,
    # plain tick labels up to 1e9 (never "1e4" over an axis); bigger figures go through `human`
    "axes.formatter.limits": (-5, 9),
    "axes.formatter.useoffset": False,
}


def apply() -> None:
    # what `matplotlib.style.use(WHITEGRID)` does for a dict of style keys, without importing
    # matplotlib.style (which reads every style file matplotlib ships)
    matplotlib.rcParams.update(WHITEGRID)  # type: ignore[arg-type]
