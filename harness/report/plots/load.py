"""What load the run held, over time: the output token rate; tasks and requests in flight against
the target; the rolling server-side hit rate against the ideal. The analyzer's measured window
(summary.json `window`, harness.analysis.window) is shaded in every panel, and the in-flight
counts and hit rates are the analyzer's own (`Analysis.in_flight`, summary.json `timeline`), so
the figure shows exactly what the window was chosen from."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from harness.analysis.output_rate import output_rate
from harness.analysis.summary_types import Analysis
from harness.report.plots.axes import StepFormatter
from harness.report.plots.base import (
    WIDE,
    colors,
    figure_title,
    legend_below,
    run_handles,
    style_handles,
)
from harness.schema import ReplaySettings


def load_target(manifest: dict) -> tuple[str, float] | None:
    """What the load generator aimed at: ("tasks", n) for a closed-loop replay, ("requests", n)
    for a tool run with a request-concurrency limit; None when the run says nothing."""
    replay = ReplaySettings.of(manifest)
    if replay.load == "closed" and replay.concurrency:
        return "tasks", float(replay.concurrency)
    settings = (manifest.get("imported") or {}).get("settings") or {}
    if settings.get("max_concurrency"):
        return "requests", float(settings["max_concurrency"])
    return None


def measured_span(a: Analysis) -> tuple[float, float] | None:
    """The analyzer's measured window on the run clock (summary.json `window`), if it has one."""
    w = a.summary.get("window") or {}
    start, end = w.get("start_s"), w.get("end_s")
    return (start, end) if start is not None and end is not None and end > start else None


def load_held(analyses: list[Analysis], bins: int = 60) -> Figure:
    fig = Figure(figsize=(WIDE, 7.6), dpi=100, layout="constrained")
    rate, held, hit = fig.subplots(3, 1, sharex=True, height_ratios=(1, 1.6, 1.2))
    figure_title(
        fig,
        "Load held over time: output rate; tasks and requests in flight vs target; rolling hit"
        " rate vs ideal. Shaded: the analyzer's measured window",
    )
    targets: dict[tuple[str, float], str] = {}
    for a, color in zip(analyses, colors(analyses), strict=False):
        recs = a.run.records
        if recs["t_sent"].notna().sum() == 0:
            continue
        t0 = float(recs["t_sent"].min())
        span = measured_span(a)
        if span:
            for ax in (rate, held, hit):
                ax.axvspan(span[0] - t0, span[1] - t0, color=color, alpha=0.08, lw=0)
        _rate(rate, a, t0, color, bins)
        _in_flight(held, a, t0, color)
        _hit(hit, a, t0, color)
        target = load_target(a.run.manifest)
        if target:
            held.axhline(target[1], color=color, ls=":", lw=1.4)
            targets.setdefault(target, color)
    _target_labels(held, targets)
    rate.set_ylabel("output tok/s")
    rate.yaxis.set_major_formatter(StepFormatter())
    held.set_ylabel("in flight")
    hit.set_ylabel("hit rate (rolling)")
    hit.set_ylim(-0.02, 1.02)
    hit.set_xlabel("seconds since the run's first send")
    legend_below(fig, *_key(analyses))
    return fig


def _key(analyses: list[Analysis]) -> tuple[list, list[str]]:
    """The runs' colours (several runs), then what each line style and the shading mean."""
    handles, labels = run_handles(analyses)
    styles: list[tuple[str, dict]] = [
        ("tasks in flight", {"lw": 1.6}),
        ("requests in flight", {"lw": 0.7}),
        ("target", {"ls": ":", "lw": 1.4}),
        ("server hit", {"lw": 1.4}),
        ("ideal hit", {"ls": "--"}),
    ]
    more, names = style_handles(styles)
    shade = Patch(facecolor="dimgrey", alpha=0.15)
    return [*handles, *more, shade], [*labels, *names, "measured window"]


def _target_labels(ax, targets: dict[tuple[str, float], str]) -> None:
    """Each target's value beside the axes' right edge, level with its line: never under the
    data, and read at any width."""
    for (kind, n), color in targets.items():
        ax.annotate(
            f"target {n:g} {kind}",
            (1.0, n),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
            color=color,
            annotation_clip=False,
        )


def _in_flight(ax, a: Analysis, t0: float, color) -> None:
    """Tasks (thick) and requests (thin) in flight: the analyzer's step functions."""
    f = a.in_flight
    ax.step(f.task_times - t0, f.tasks, where="post", color=color, lw=1.6)
    ax.step(f.request_times - t0, f.requests, where="post", color=color, lw=0.7, alpha=0.8)


def _hit(ax, a: Analysis, t0: float, color) -> None:
    """summary.json `timeline`: the hit rate of the requests sent in the trailing bins."""
    tl = a.summary.get("timeline") or {}
    t = np.asarray(tl.get("t") or [], dtype=float) - t0
    for key, style in (("hit_rate", "-"), ("ideal_hit_rate", "--")):
        values = np.array([np.nan if v is None else v for v in tl.get(key) or []], dtype=float)
        if values.size and np.isfinite(values).any():
            ax.plot(
                t,
                values,
                ls=style,
                color=color,
                lw=1.4 if style == "-" else 1.0,
            )


def _rate(ax, a: Analysis, t0: float, color, bins: int) -> None:
    ok = a.run.ok
    if ok.empty:
        return
    done = ok["t_done"].to_numpy(dtype=float) - t0
    tokens = np.nan_to_num(a.per_request["completion_tokens"].to_numpy(dtype=float))
    ax.step(*output_rate(done, tokens, bins), where="post", color=color)
