"""A gate calibration's comparisons as rates: the share that said `regressed`, with its 95 %
Clopper-Pearson interval, and the hosts' load over its runs (harness/app/gate/calibration.py runs
the comparisons; the rates are computed here, as every statistic is)."""

from __future__ import annotations

import numpy as np

HOST_KEYS = ("load_average", "wait_share", "others_load_per_cpu")


def host_summary(hosts: list[dict]) -> dict:
    """Min, median and max over the runs' host states of the load average and the wait share."""
    out = {}
    for key in HOST_KEYS:
        v = np.array([h.get(key) for h in hosts if h.get(key) is not None], dtype=float)
        out[key] = None if not v.size else [round(float(q), 3) for q in np.quantile(v, [0, 0.5, 1])]
    return out


def rate(results: list[dict]) -> dict:
    """Share of comparisons that said `regressed`, with its 95 % Clopper-Pearson interval."""
    from scipy.stats import binomtest  # scipy.stats costs ~1 s to import: the calibration only

    n = len(results)
    hits = sum(r["verdict"] == "regressed" for r in results)
    verdicts = {
        v: sum(r["verdict"] == v for r in results)
        for v in ("regressed", "no change detected", "inconclusive")
    }
    ci = binomtest(hits, n).proportion_ci(0.95) if n else None
    return {
        "hits": hits,
        "n": n,
        "rate": hits / n if n else None,
        "interval_95": None if ci is None else [round(ci.low, 4), round(ci.high, 4)],
        "verdicts": verdicts,
        "runs_used_mean": float(np.mean([sum(r["runs_used"]) for r in results])) if n else None,
        "smallest_detectable_median": _median_smallest(results),
    }


def _median_smallest(results: list[dict]) -> dict[str, float]:
    per: dict[str, list[float]] = {}
    for r in results:
        for key, value in (r["smallest_detectable"] or {}).items():
            if value is not None and np.isfinite(value):
                per.setdefault(key, []).append(float(value))
    return {k: round(float(np.median(v)), 4) for k, v in per.items()}
