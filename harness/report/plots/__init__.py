"""The report's figures (matplotlib Figures, no pyplot): latency, cache, load, sessions and trends."""

from harness.report.plots.matplotlib_internals import import_figures

import_figures()  # before any module here imports matplotlib's figures: without their help texts
