"""The one colour table: a colour per run, per cache outcome (hit, each miss category) and per
tier the hits came from, used alike by the headline card, the figures, the trend and the notebooks.

Runs take seaborn's "deep" palette in the order the page lists them: the first run is blue and
the second orange in every figure of a page, and in a notebook that calls `run_colors`.

Hits are green (tiers in shades of green: all of them are hits), the server's rules blue,
losses red and orange, what nothing explains grey. Hex values, so HTML and matplotlib agree.
"""

from __future__ import annotations

RUNS = (  # seaborn's "deep" palette
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)
HIT = "#2ca02c"
MISS = {
    "cold": "#8c564b",  # brown: never seen before, nobody's fault
    "granularity": "#1f77b4",
    "prompt_cap": "#aec7e8",
    "last_block": "#17becf",
    "no_hits": "#08306b",
    "ineligible": "#6baed6",
    "expired": "#fdae6b",
    "in_flight": "#ff7f0e",
    "misrouted": "#9467bd",
    "evicted": "#d62728",
    "unexplained": "#7f7f7f",
    "unreported": "#dddddd",
}
TIER = {"device": HIT, "cpu": "#74c476", "disk": "#006d2c", "remote": "#b8e186"}
OTHER = "#bcbd22"  # a category this table does not know yet
IDEAL = "#000000"  # the ideal (infinite cache) mark, in every cache figure

OUTCOME = {"hit": HIT, **MISS}


def outcome_color(key: str) -> str:
    """The colour of `hit` or a miss category (summary.json `cache.miss_tokens` keys)."""
    return OUTCOME.get(key, OTHER)


def run_colors(n: int) -> list[str]:
    """The colours of `n` runs (or series), in order; the palette repeats past ten."""
    return [RUNS[i % len(RUNS)] for i in range(max(n, 1))]


def tier_color(tier: str) -> str:
    return TIER.get(tier, OTHER)
