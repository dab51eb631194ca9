"""Across the points of a sweep: each point's row, the frontier, the saturation point, and P/D
rate matching.

Saturation (the first phase of prefill/decode rate matching): raise concurrency until throughput
stops growing. The saturation point is the first point after which no later point adds more
than `growth` (5 %) of throughput. `P/D = decode_rate / prefill_rate` with both rates in
requests/s at saturation: that many prefill instances per decode instance keep both busy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.analysis.frontier import pareto_frontier
from harness.analysis.ideal.walk import with_ideal
from harness.analysis.loader import load_run
from harness.analysis.metrics import p90_inverse, request_metrics
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
    recs, _ = with_ideal(load_run(run_dir))  # the trace gives cached_tokens_ideal
    ok = recs[(recs["status"] == "ok") & (recs["phase"] == "measure")]
    uncached = ok["prompt_tokens_expected"] - ok["cached_tokens_ideal"]
    out: dict[str, float | None] = {}
    for name, rows in (
        ("short", ok[uncached < LONG_UNCACHED_TOKENS]),
        ("long", ok[uncached >= LONG_UNCACHED_TOKENS]),
    ):
        per_request = request_metrics(rows)  # the one definition of TTFT and TPOT
        ttft = per_request["ttft"].to_numpy(dtype=float)
        out[f"{name}_requests"] = int(len(rows))
        out[f"{name}_ttft_p90_s"] = float(np.percentile(ttft, 90)) if ttft.size else None
        out[f"{name}_interactivity_p90"] = p90_inverse(per_request["tpot"].to_numpy())
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
    usable = [
        i
        for i, r in enumerate(rows)
        if r["tpgs"] is not None and r["interactivity_p90"] is not None
    ]
    idx = pareto_frontier([(rows[i]["tpgs"], rows[i]["interactivity_p90"]) for i in usable])
    return [usable[i] for i in idx]


LOAD_PARAMS = ("load.concurrency", "load.session_rate", "load.time_scale")


def sweep_summary(rows: list[dict], params: tuple[str, ...]) -> dict:
    """sweep.json's content: the points, the frontier, and saturation for a one-axis load sweep."""
    load_sweep = len(params) == 1 and params[0] in LOAD_PARAMS
    sat = saturation_point([r["requests_per_s"] for r in rows]) if load_sweep else None
    reached = sat is not None and (
        sat < len(rows) - 1 or len(rows) == 1 or not _still_growing(rows)
    )
    return {
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


def _still_growing(rows: list[dict], growth: float = 0.05) -> bool:
    """The last point still added more than `growth` over the one before: not saturated yet."""
    a, b = rows[-2]["requests_per_s"], rows[-1]["requests_per_s"]
    return a is not None and b is not None and b > a * (1 + growth)


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
