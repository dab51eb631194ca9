"""Across the points of a sweep: the frontier, the saturation point, and P/D rate matching.

Saturation (the first phase of prefill/decode rate matching): raise concurrency until throughput
stops growing. The saturation point is the first point after which no later point adds more
than `growth` (5 %) of throughput. `P/D = decode_rate / prefill_rate` with both rates in
requests/s at saturation: that many prefill instances per decode instance keep both busy.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import RunFolderError
from harness.schema import SUMMARY_FILE

HEADLINE = (
    "tpgs",
    "interactivity_p90",
    "cache_hit_rate",
    "ideal_cache_hit_rate",
    "requests_ok",
    "requests_failed",
)


LONG_UNCACHED_TOKENS = 1024  # a request that must compute this many prompt tokens is "long"


def class_split(run_dir: Path) -> dict:
    """TTFT p90 and P90 interactivity of short (warm) vs long (cold) requests.

    A request is long when the prompt tokens an ideal cache would not serve (expected prompt -
    ideal cached) reach LONG_UNCACHED_TOKENS: head-of-line experiments read this split.
    """
    import numpy as np

    from harness.analysis.ideal.walk import with_ideal
    from harness.analysis.loader import load_run

    recs, _ = with_ideal(load_run(run_dir))  # the trace gives cached_tokens_ideal
    ok = recs[(recs["status"] == "ok") & (recs["phase"] == "measure")]
    uncached = ok["prompt_tokens_expected"] - ok["cached_tokens_ideal"]
    out: dict[str, float | None] = {}
    for name, rows in (
        ("short", ok[uncached < LONG_UNCACHED_TOKENS]),
        ("long", ok[uncached >= LONG_UNCACHED_TOKENS]),
    ):
        ttft = (rows["t_first_token"] - rows["t_sent"]).to_numpy(dtype=float)
        multi = rows[rows["completion_tokens"] >= 2]
        tpot = (
            (multi["t_last_token"] - multi["t_first_token"]) / (multi["completion_tokens"] - 1)
        ).to_numpy(dtype=float)
        out[f"{name}_requests"] = int(len(rows))
        out[f"{name}_ttft_p90_s"] = float(np.percentile(ttft, 90)) if ttft.size else None
        p90 = float(np.percentile(tpot, 90)) if tpot.size else 0.0
        out[f"{name}_interactivity_p90"] = 1.0 / p90 if p90 > 0 else None
    return out


def point_row(label: str, run_dir: Path, summary: dict) -> dict:
    rates = summary.get("throughput") or {}
    ttft = summary.get("ttft_s") or {}
    window = summary.get("window") or {}
    return {
        "point": label,
        "run_dir": str(run_dir),
        **{k: summary.get(k) for k in HEADLINE},
        "ttft_p90_s": ttft.get("p90"),
        "requests_per_s": rates.get("requests_per_s"),
        "output_tokens_per_s": rates.get("output_tokens_per_s"),
        "total_tokens_per_s": rates.get("total_tokens_per_s"),
        "tasks_in_flight_mean": window.get(
            "tasks_in_flight_mean"
        ),  # time-weighted, measured window
        "tasks_held": window.get("tasks_held"),  # of load.concurrency (closed loop)
        **class_split(run_dir),
    }


def saturation_point(values: list[float | None], growth: float = 0.05) -> int | None:
    """Index of the point where throughput stops growing by more than `growth`."""
    clean = [v if v is not None else float("nan") for v in values]
    for i, v in enumerate(clean):
        if v != v:  # NaN: the point produced nothing
            continue
        later = [x for x in clean[i + 1 :] if x == x]
        if all(x <= v * (1 + growth) for x in later):
            return i
    return None


def frontier(rows: list[dict]) -> list[int]:
    from harness.analysis.frontier import pareto_frontier

    usable = [
        i
        for i, r in enumerate(rows)
        if r["tpgs"] is not None and r["interactivity_p90"] is not None
    ]
    idx = pareto_frontier([(rows[i]["tpgs"], rows[i]["interactivity_p90"]) for i in usable])
    return [usable[i] for i in idx]


LOAD_PARAMS = ("load.concurrency", "load.session_rate", "load.time_scale")


def finish_sweep(
    run_dir: Path, results: list, *, params: tuple[str, ...] = (), quiet: bool = False
) -> dict:
    """sweep.json, the cross-point report and table. Saturation only for a one-axis load sweep."""
    from harness.app.reporting import write_report

    rows = [point_row(r.run_dir.name, r.run_dir, r.summary) for r in results]
    load_sweep = len(params) == 1 and params[0] in LOAD_PARAMS
    sat = saturation_point([r["requests_per_s"] for r in rows]) if load_sweep else None
    reached = sat is not None and (
        sat < len(rows) - 1 or len(rows) == 1 or not _still_growing(rows)
    )
    out = {
        "params": list(params),
        "points": rows,
        "frontier": [rows[i]["point"] for i in frontier(rows)],
        "saturation": None
        if sat is None
        else {
            "point": rows[sat]["point"],
            "reached": reached,
            "requests_per_s": rows[sat]["requests_per_s"],
            "total_tokens_per_s": rows[sat]["total_tokens_per_s"],
        },
    }
    (run_dir / "sweep.json").write_text(json.dumps(out, indent=2) + "\n")
    report = write_report([r.run_dir for r in results], run_dir / "report.html")
    if not quiet:
        print(render_sweep(out))
        print(f"sweep report: {report}")
    return out


def _still_growing(rows: list[dict], growth: float = 0.05) -> bool:
    """The last point still added more than `growth` over the one before: not saturated yet."""
    a, b = rows[-2]["requests_per_s"], rows[-1]["requests_per_s"]
    return a is not None and b is not None and b > a * (1 + growth)


def render_sweep(sweep: dict) -> str:
    def fmt(v, spec=".3g"):
        return "-" if v is None else format(v, spec)

    lines = [
        f"{'point':<40} {'req/s':>8} {'tok/s':>10} {'TPGS':>10} {'P90 inter.':>10} {'TTFT p90':>9} {'hit':>6} {'ideal':>6} {'tasks':>6}"
    ]
    for r in sweep["points"]:
        lines.append(
            f"{r['point']:<40} {fmt(r['requests_per_s']):>8} {fmt(r['total_tokens_per_s']):>10} "
            f"{fmt(r['tpgs']):>10} {fmt(r['interactivity_p90']):>10} {fmt(r['ttft_p90_s']):>9} "
            f"{fmt(r['cache_hit_rate'], '.3f'):>6} {fmt(r['ideal_cache_hit_rate'], '.3f'):>6} "
            f"{fmt(r.get('tasks_in_flight_mean')):>6}"
        )
    if any(r.get("long_requests") for r in sweep["points"]):
        lines.append(
            f"{'point':<40} {'short n':>8} {'short TTFT p90':>15} {'short P90 inter.':>17} "
            f"{'long n':>7} {'long TTFT p90':>14}"
        )
        for r in sweep["points"]:
            lines.append(
                f"{r['point']:<40} {r['short_requests']:>8} {fmt(r['short_ttft_p90_s']):>15} "
                f"{fmt(r['short_interactivity_p90']):>17} {r['long_requests']:>7} "
                f"{fmt(r['long_ttft_p90_s']):>14}"
            )
    lines.append(f"frontier (TPGS vs P90 interactivity): {', '.join(sweep['frontier']) or '-'}")
    sat = sweep.get("saturation")
    if sat is not None:
        note = (
            ""
            if sat.get("reached", True)
            else " (not reached: throughput still growing at the last point; a lower bound)"
        )
        lines.append(f"saturation: {sat['point']} at {fmt(sat['requests_per_s'])} req/s{note}")
    return "\n".join(lines)


def _saturated_rate(path: Path) -> tuple[float, str]:
    """Requests/s at saturation from a sweep folder (sweep.json) or a single run (summary.json)."""
    sweep, summary = path / "sweep.json", path / SUMMARY_FILE
    if sweep.is_file():
        data = json.loads(sweep.read_text())
        sat = data.get("saturation")
        if not sat or not sat.get("requests_per_s"):
            raise RunFolderError("the sweep found no saturation point", path=sweep)
        if not sat.get("reached", True):
            return float(
                sat["requests_per_s"]
            ), f"{sat['point']}, saturation not reached: a lower bound"
        return float(sat["requests_per_s"]), f"saturation at {sat['point']}"
    if summary.is_file():
        rate = (json.loads(summary.read_text()).get("throughput") or {}).get("requests_per_s")
        if not rate:
            raise RunFolderError(
                "has no requests_per_s", path=summary, field="throughput.requests_per_s"
            )
        return float(rate), "single run"
    raise RunFolderError(
        "neither sweep.json nor summary.json found (run `harness run` first)", path=path
    )


def plan_pd(prefill_run: str | Path, decode_run: str | Path) -> dict:
    prefill_rate, p_src = _saturated_rate(Path(prefill_run))
    decode_rate, d_src = _saturated_rate(Path(decode_run))
    return {
        "prefill_rate_rps": prefill_rate,
        "prefill_source": p_src,
        "decode_rate_rps": decode_rate,
        "decode_source": d_src,
        "p_to_d": decode_rate / prefill_rate,
    }
