"""A sweep in words: one row per point, the short/long split, the frontier and saturation."""

from __future__ import annotations

from harness.report.numbers import fmt as number


def render_sweep(sweep: dict) -> str:
    def fmt(v, spec=".3g"):  # as the terminal writes numbers: 29.8k, never 2.98e+04
        return number(v, spec)

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
